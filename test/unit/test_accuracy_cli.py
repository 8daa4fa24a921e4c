"""CLI contract, and the accuracy tool being a pure client (no SGLang, torch; lazy aiohttp and
datasets)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from accuracy_support import PYTHON_DIR
from sglang_nvfp4_patches import __version__
from sglang_nvfp4_patches.accuracy import errors
from sglang_nvfp4_patches.accuracy.cli import add_accuracy_parser
from sglang_nvfp4_patches.cli import main
from sglang_nvfp4_patches.errors import EXIT_INTERNAL, EXIT_USAGE, UsageError

_PROBE = """
import json, sys
import sglang_nvfp4_patches.accuracy.cli
import sglang_nvfp4_patches.accuracy.compare
import sglang_nvfp4_patches.accuracy.report
light = sorted(m for m in ("aiohttp", "datasets", "torch", "sglang") if m in sys.modules)
import sglang_nvfp4_patches.accuracy.ab
import sglang_nvfp4_patches.accuracy.dataset
import sglang_nvfp4_patches.accuracy.run
heavy = sorted(m for m in ("datasets", "torch", "sglang") if m in sys.modules)
print(json.dumps({"light": light, "heavy": heavy}))
"""


def test_no_sglang_or_torch_and_lazy_aiohttp_and_datasets() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PYTHON_DIR), *sys.path])}
    out = subprocess.run(
        [sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, check=True
    ).stdout
    assert json.loads(out) == {"light": [], "heavy": []}


def _parent() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sglang-nvfp4-patches")
    add_accuracy_parser(parser.add_subparsers(dest="command", required=True))
    return parser


def test_add_accuracy_parser_run_defaults() -> None:
    args = _parent().parse_args(["accuracy", "run", "--data", "d", "--out", "o.json"])
    assert callable(args.func)
    assert (args.base_url, args.api, args.model) == ("http://127.0.0.1:30000", "native", "default")
    assert (args.shots, args.parallel, args.limit, args.subjects) == (5, 64, None, None)
    assert (args.data, args.out) == ("d", Path("o.json"))
    args = _parent().parse_args(
        ["accuracy", "run", "--data", "d", "--out", "o", "--subjects", "a, b,,", "--api", "openai"]
    )
    assert args.subjects == ("a", "b") and args.api == "openai"


def test_run_help_shows_the_base_url_default(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _parent().parse_args(["accuracy", "run", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--base-url BASE_URL server URL (http://127.0.0.1:30000)" in help_text


def test_add_accuracy_parser_ab_defaults() -> None:
    args = _parent().parse_args(
        ["accuracy", "ab", "--model-path", "m", "--data", "cais/mmlu", "--b-args", "-x 1 'a b'"]
    )
    assert callable(args.func)
    assert (args.a_args, args.b_args, args.data) == ((), ("-x", "1", "a b"), "cais/mmlu")
    assert (args.out_dir, args.launcher, args.startup_timeout) == (Path("accuracy-ab"), None, 1200)
    assert (args.shots, args.parallel, args.alpha, args.json) == (5, 64, 0.05, False)


def test_add_accuracy_parser_compare() -> None:
    args = _parent().parse_args(["accuracy", "compare", "a.json", "b.json", "--alpha", "0.01"])
    assert callable(args.func)
    assert (args.run_a, args.run_b, args.alpha, args.json) == (
        Path("a.json"),
        Path("b.json"),
        0.01,
        False,
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["accuracy"],
        ["accuracy", "run", "--out", "o"],
        ["accuracy", "run", "--data", "d", "--out", "o", "--parallel", "0"],
        ["accuracy", "run", "--data", "d", "--out", "o", "--timeout", "-1"],
        ["accuracy", "run", "--data", "d", "--out", "o", "--shots", "x"],
        ["accuracy", "compare", "a.json", "b.json", "--alpha", "1"],
    ],
)
def test_bad_arguments_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        _parent().parse_args(argv)
    assert info.value.code == 2
    assert "error:" in capsys.readouterr().err


RUN = ["accuracy", "run", "--data", "d", "--out", "o"]
AB = ["accuracy", "ab", "--model-path", "m", "--data", "d"]


@pytest.mark.parametrize(
    ("argv", "value"),
    [
        ([*RUN, "--timeout"], "inf"),
        ([*RUN, "--timeout"], "nan"),
        ([*RUN, "--timeout"], "1e300"),  # past a week: the event loop's timers overflow
        ([*RUN, "--backoff"], "-inf"),
        ([*RUN, "--backoff"], "nan"),
        ([*AB, "--startup-timeout"], "nan"),
        ([*AB, "--startup-timeout"], "inf"),
        ([*AB, "--stop-grace"], "inf"),
        ([*AB, "--timeout"], "inf"),
        (["accuracy", "compare", "a", "b", "--alpha"], "nan"),
    ],
)
def test_a_non_finite_or_huge_number_is_refused_up_front(
    argv: list[str], value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before any request or server start (argparse itself exits 2)."""
    with pytest.raises(SystemExit) as info:
        main([*argv[:-1], f"{argv[-1]}={value}"])  # "=": "-inf" alone reads as an option
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert f"{argv[-1]}: must be a finite number" in err or "between 0 and 1" in err
    assert f"got {value}" in err and "Traceback" not in err


def test_the_largest_accepted_time_is_a_week() -> None:
    args = _parent().parse_args([*RUN, "--timeout", "604800", "--backoff", "0"])
    assert (args.timeout, args.backoff) == (604800.0, 0.0)
    with pytest.raises(SystemExit):
        _parent().parse_args([*RUN, "--timeout", "604800.5"])


@pytest.mark.parametrize(
    ("typed", "expected"),
    [
        (["--b-args", "--disable-cuda-graph"], ("--disable-cuda-graph",)),
        (["--b-args=--disable-cuda-graph"], ("--disable-cuda-graph",)),
        (["--b-args", "--attention-backend trtllm_mha"], ("--attention-backend", "trtllm_mha")),
        (["--b-args", "-x"], ("-x",)),
    ],
)
def test_a_single_server_flag_is_taken_as_typed(typed: list[str], expected: tuple) -> None:
    from sglang_nvfp4_patches.accuracy.cli import attach_command_line_values
    from sglang_nvfp4_patches.cli import build_parser

    argv = ["accuracy", "ab", "--model-path", "m", "--data", "d", "--a-args", "--enable-x", *typed]
    for parser in (_parent(), build_parser()):
        args = parser.parse_args(attach_command_line_values(argv))
        assert (args.a_args, args.b_args) == (("--enable-x",), expected)


@pytest.mark.parametrize(
    "name", sorted({n for n in dir(errors) if n.endswith("Error")} - {"ServerError"})
)
def test_every_accuracy_input_error_is_a_usage_error(name: str) -> None:
    assert issubclass(getattr(errors, name), UsageError) or name == "ServerError"
    assert not issubclass(errors.ServerError, UsageError)  # ab's exit 3, with the log tail


def test_the_top_level_cli_prints_accuracy_errors_verbatim(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Accuracy messages quote paths and library errors as they are (whitespace kept), while
    other UsageErrors (SGLang's multi-line refusals) are collapsed onto one line."""
    bad = tmp_path / "two  spaces" / "run.json"
    bad.parent.mkdir()
    bad.write_text("not json", encoding="utf-8")
    assert main(["accuracy", "compare", str(bad), str(bad)]) == EXIT_USAGE
    assert capsys.readouterr().err == (
        f"error: {bad}: not readable JSON (Expecting value: line 1 column 1 (char 0))\n"
    )
    assert UsageError("sglang serve:\n  bad  flag").cli_message() == "sglang serve: bad flag"


def test_every_exit_status_has_one_meaning() -> None:
    from sglang_nvfp4_patches import errors

    codes = {name: value for name, value in vars(errors).items() if name.startswith("EXIT_")}
    assert len(set(codes.values())) == len(codes), codes
    assert codes["EXIT_INTERNAL"] not in (0, 1, 2, 3, 130, 141)


def _run_file(path: Path, side: str = "A") -> Path:
    from sglang_nvfp4_patches.accuracy.store import RUN_FORMAT

    record = {"id": "law/0", "subject": "law", "answer": "A", "prediction": "A", "correct": True}
    document = {"format": RUN_FORMAT, "version": 1, "side": side, "records": [record]}
    path.write_text(json.dumps(document))
    return path


def _compare_with_a_planted_bug(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, error: Exception, tempdir: Path
) -> tuple[int, str]:
    """``accuracy compare`` whose comparison raises ``error`` (a bug of ours), with the
    temporary directory at ``tempdir``: its exit status and the run file it was given."""
    import tempfile

    from sglang_nvfp4_patches.accuracy import compare

    def planted(*args: object, **kwargs: object) -> None:
        raise error

    monkeypatch.setattr(compare, "compare_runs", planted)
    monkeypatch.setattr(tempfile, "tempdir", str(tempdir))
    run, other = str(_run_file(tmp_path / "a.json")), str(_run_file(tmp_path / "b.json", "B"))
    return main(["accuracy", "compare", run, other]), run


def test_a_bug_is_an_internal_error_with_its_traceback_in_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Never exit 1 (a verdict) or print a traceback for an exception of our own."""
    bug = ZeroDivisionError("planted bug")
    code, run = _compare_with_a_planted_bug(monkeypatch, tmp_path, bug, tmp_path)
    assert code == EXIT_INTERNAL
    captured = capsys.readouterr()
    (saved,) = tmp_path.glob("sglang-nvfp4-patches-internal-error-*.txt")
    assert captured.out == ""
    assert captured.err == (
        "internal error: ZeroDivisionError: planted bug; this is a bug in sglang-nvfp4-patches "
        f"{__version__}, not a problem with your input; its traceback is saved in {saved}: "
        "please report it with that traceback\n"
    )
    text = saved.read_text()
    assert f"command line: accuracy compare {run} {tmp_path / 'b.json'}\n" in text
    assert "Traceback (most recent call last):" in text and "in planted" in text
    assert text.endswith("ZeroDivisionError: planted bug\n")


def test_an_internal_error_prints_its_traceback_when_no_file_can_be_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    bug = KeyError("planted")
    code, _ = _compare_with_a_planted_bug(monkeypatch, tmp_path, bug, tmp_path / "missing")
    assert code == EXIT_INTERNAL
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("internal error: KeyError: 'planted'; ")
    assert err[0].endswith("its traceback follows: please report it with that traceback")
    assert err[1] == "Traceback (most recent call last):" and err[-1] == "KeyError: 'planted'"


@pytest.mark.parametrize("link", ["loop", "dangling"])
def test_an_out_dir_that_is_a_broken_link_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], link: str
) -> None:
    out = tmp_path / "ab"
    out.symlink_to(out if link == "loop" else tmp_path / "nowhere" / "ab")
    argv = [*AB[:-1], str(tmp_path / "no-data"), "--out-dir", str(out), "--launcher", "false"]
    assert main(argv) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith(f"error: --out-dir {out}: {out} is a symbolic link to ")
    assert "which does not exist or loops back on itself" in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("link", ["loop", "dangling"])
def test_an_out_that_is_a_broken_link_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], link: str
) -> None:
    out = tmp_path / "run.json"
    out.symlink_to(out if link == "loop" else tmp_path / "nowhere.json")
    argv = ["accuracy", "run", "--data", str(tmp_path / "no-data"), "--out", str(out)]
    assert main(argv) == EXIT_USAGE
    err = capsys.readouterr().err
    says = "Too many levels of symbolic links" if link == "loop" else "which does not exist"
    assert err.startswith(f"error: --out {out}: ") and says in err and len(err.splitlines()) == 1
