"""The command line in fresh processes, for everything that ends before SGLang is imported.

Start-up cost, bad ``--model`` input and closed pipes are properties of a whole process, so
each case runs ``python -m sglang_nvfp4_patches`` and reads its import trace
(``-X importtime``): none of these may import torch or SGLang.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from accuracy_support import PYTHON_DIR
from sglang_nvfp4_patches import __version__

# "import time: self [us] | cumulative | imported package", nesting shown by indentation.
_TRACE_LINE = re.compile(r"^import time:\s+\d+ \|\s+\d+ \| +(?P<module>\S+)$")
_HEAVY = re.compile(r"^(torch|sglang)(\.|$)")


@dataclass(frozen=True)
class Done:
    returncode: int
    stdout: str
    stderr_lines: list[str]  # without the import trace
    modules: list[str]

    @property
    def heavy(self) -> list[str]:
        return [module for module in self.modules if _HEAVY.match(module)]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SGLANG_NVFP4")}
    env["PYTHONPATH"] = os.pathsep.join([str(PYTHON_DIR), *sys.path])
    return env


def run_cli(*args: str, stdout: int | None = subprocess.PIPE) -> Done:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "sglang_nvfp4_patches", *args],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
        timeout=120,
        check=False,
    )
    modules, other = [], []
    for line in done.stderr.splitlines():
        match = _TRACE_LINE.match(line)
        if match:
            modules.append(match["module"])
        elif not line.startswith("import time:"):
            other.append(line)
    assert "sglang_nvfp4_patches.cli" in modules  # the trace really was read
    return Done(done.returncode, done.stdout or "", other, modules)


def test_the_import_trace_reader_sees_torch() -> None:
    """The guard below can fail: a command that does import torch shows up in the trace."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import torch"],
        capture_output=True,
        text=True,
        check=True,
        env=_env(),
    )
    modules = [m["module"] for m in map(_TRACE_LINE.match, done.stderr.splitlines()) if m]
    assert "torch" in modules


@pytest.mark.parametrize(
    "argv",
    [
        ["accuracy", "compare", "--help"],
        ["accuracy", "run", "--help"],
        ["--version"],
        ["--help"],
        ["explain", "--help"],
        ["doctor", "--help"],
    ],
)
def test_help_and_version_import_neither_torch_nor_sglang(argv: list[str]) -> None:
    done = run_cli(*argv)
    assert done.returncode == 0, done.stderr_lines
    assert done.stdout.strip()
    assert done.heavy == []


@pytest.mark.parametrize(
    "argv",
    [["explain", "--gpu", "sm99"], ["accuracy", "compare", "only-one.json"], ["nonsense"]],
)
def test_argument_errors_import_neither_torch_nor_sglang(argv: list[str]) -> None:
    done = run_cli(*argv)
    assert done.returncode == 2
    assert "error:" in done.stderr_lines[-1] and "Traceback" not in "\n".join(done.stderr_lines)
    assert done.heavy == []


def _seconds(*args: str) -> float:
    """The best of two wall times of a fresh ``python -m sglang_nvfp4_patches ARGS``."""
    times = []
    for _ in range(2):
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "sglang_nvfp4_patches", *args],
            capture_output=True,
            env=_env(),
            timeout=120,
            check=False,
        )
        times.append(time.perf_counter() - start)
    return min(times)


@pytest.mark.parametrize(
    "argv",
    [
        ["explain", "--bogus"],
        ["explain", "--gpu", "sm100", "--kv-cache-dtype", "fp8_e4m3", "--bogus=1"],
        ["accuracy", "run", "--bogus"],  # once: "required: --out, --data", never --bogus
        ["accuracy", "ab", "--model-path", "m", "--bogus"],
        ["doctor", "--bogus"],
    ],
)
def test_an_unknown_option_is_named_at_once_before_any_heavy_import(argv: list[str]) -> None:
    """Once ``explain --bogus`` imported SGLang and torch (7-12 s) before naming it. Timed as
    a ratio to ``--help``, so a loaded machine moves both: an SGLang import is ~100x."""
    done = run_cli(*argv)
    assert done.returncode == 2 and done.heavy == []
    assert done.stderr_lines[-1].endswith("error: unrecognized arguments: --bogus")
    assert _seconds(*argv) < 4 * _seconds("--help")


def test_a_server_flag_of_sglang_is_not_taken_for_an_unknown_option() -> None:
    """Read from SGLang's sources as text: its flags (and their abbreviations) pass on to its
    own parser; a bad --model is then the first error, still before SGLang's import."""
    done = run_cli("explain", "--kv-cache-dtype", "fp8_e4m3", "--tp-size=4", "--model", "/nope")
    assert done.returncode == 2 and done.heavy == []
    assert done.stderr_lines[-1].startswith("error: --model /nope: not a local directory")


def _config_dir(root: Path, name: str, text: str | None) -> Path:
    directory = root / name
    directory.mkdir()
    if text is not None:
        (directory / "config.json").write_text(text)
    return directory


@pytest.mark.parametrize(
    ("name", "config", "says"),
    [
        ("array", "[]", "JSON array, not an object"),
        ("no-model-type", '{"architectures": ["LlamaForCausalLM"]}', '"model_type"'),
        ("empty-model-type", '{"model_type": ""}', '"model_type"'),
        ("not-json", "{oops", "is not valid JSON"),
        ("deep", '{"model_type": "x", "a": ' + "[" * 3000 + "]" * 3000 + "}", "nested too deeply"),
        ("no-config", None, "config.json"),
    ],
)
def test_explain_rejects_a_bad_model_dir_before_importing_sglang(
    tmp_path: Path, name: str, config: str | None, says: str
) -> None:
    done = run_cli("explain", "--model", str(_config_dir(tmp_path, name, config)), "--json")
    assert done.returncode == 2
    assert len(done.stderr_lines) == 1, done.stderr_lines
    assert done.stderr_lines[0].startswith("error: ") and says in done.stderr_lines[0]
    assert done.stdout == ""
    assert done.heavy == []


@pytest.mark.parametrize("name", ["hf_quant_config.json", "generation_config.json"])
def test_explain_rejects_a_file_beside_the_config_before_importing_sglang(
    tmp_path: Path, name: str
) -> None:
    """A FIFO SGLang would open beside config.json: refused unread, naming it, no import."""
    directory = _config_dir(tmp_path, "model", '{"model_type": "llama4"}')
    os.mkfifo(directory / name)
    done = run_cli("explain", "--model", str(directory), "--json")
    assert done.returncode == 2
    assert done.stderr_lines == [
        f"error: {directory / name}: is a FIFO (named pipe), not a regular file; SGLang reads "
        f"it beside config.json: put the checkpoint's own {name} there, or remove it"
    ]
    assert done.heavy == []


def test_explain_rejects_a_hub_id_before_importing_sglang() -> None:
    done = run_cli("explain", "--model", "nvidia/Gemma-4-26B-A4B-NVFP4")
    assert done.returncode == 2
    assert done.stderr_lines == [
        "error: --model nvidia/Gemma-4-26B-A4B-NVFP4: not a local directory; explain never "
        "contacts the Hub, so download the checkpoint's config.json into a directory and "
        "pass that"
    ]
    assert done.heavy == []


def test_explain_given_the_config_file_itself_names_its_directory(tmp_path: Path) -> None:
    config = _config_dir(tmp_path, "model", '{"model_type": "gemma4"}') / "config.json"
    done = run_cli("explain", "--model", str(config))
    assert done.returncode == 2
    assert done.stderr_lines == [
        f"error: --model {config}: is a file; --model takes the directory that holds the "
        f"checkpoint's config.json (here: --model {config.parent})"
    ]
    assert done.heavy == []


def _run_file(path: Path) -> str:
    records = [
        {"id": f"law/{i}", "subject": "law", "answer": "A", "prediction": "A", "correct": True}
        for i in range(3)
    ]
    head = {"format": "sglang-nvfp4-patches/accuracy-run", "version": 1, "complete": True}
    path.write_text(json.dumps({**head, "run": path.name, "records": records}))
    return str(path)


@pytest.mark.parametrize(
    ("mode", "returncode"),
    [
        ("json", 141),  # as a shell reports a process ended by SIGPIPE
        ("table", 141),
        ("version", 0),  # argparse itself ignores a failed write of --version/--help
    ],
)
def test_a_reader_that_left_early_gets_no_traceback(
    tmp_path: Path, mode: str, returncode: int
) -> None:
    """``... | head -1``: the reader is gone before the output is written (read end closed)."""
    runs = [_run_file(tmp_path / "a.json"), _run_file(tmp_path / "b.json")]
    argv = {
        "json": ["accuracy", "compare", *runs, "--json"],
        "table": ["accuracy", "compare", *runs],
        "version": ["--version"],
    }[mode]
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = run_cli(*argv, stdout=write_end)
    finally:
        os.close(write_end)
    assert done.stderr_lines == []
    assert done.returncode == returncode
    assert done.heavy == []  # accuracy compare itself runs without torch or SGLang


def test_the_console_script_names_itself_in_version() -> None:
    """pip's console script runs ``cli.main`` with argv[0] = its own path."""
    script = Path(sys.executable).with_name("sglang-nvfp4-patches")
    assert script.exists(), "scripts/setup.sh installs this project with its console script"
    done = subprocess.run(
        [str(script), "--version"], env=_env(), capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout) == (0, f"sglang-nvfp4-patches {__version__}\n")
    module = run_cli("--version")
    assert module.stdout == f"python -m sglang_nvfp4_patches {__version__}\n"
