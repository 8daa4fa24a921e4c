"""``explain`` on input only SGLang can judge, and Ctrl-C while SGLang is being imported.

Flag checks run ``cli.main`` in this process (SGLang already imported, plugin loaded by
SGLang); Ctrl-C during the imports needs a fresh ``python -m sglang_nvfp4_patches``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from sglang_nvfp4_patches import cli
from sglang_nvfp4_patches.sglang_resolution import server_arg_choices
from support.configs import GEMMA4_NVFP4_MOE, LLAMA4_NVFP4
from support.release import installed_sglang


def explain_here(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, list[str]]:
    code = cli.main(["explain", "--gpu", "sm100", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err.splitlines()


@pytest.mark.release_matrix
def test_choices_are_read_from_sglangs_own_launcher() -> None:
    from sglang.srt import server_args

    choices = server_arg_choices()
    assert set(choices["attention_backend"]) == set(server_args.ATTENTION_BACKEND_CHOICES)
    assert set(choices["quantization"]) == set(server_args.QUANTIZATION_CHOICES)


@pytest.mark.release_matrix
@pytest.mark.parametrize(
    ("flag", "valid"), [("--attention-backend", "triton"), ("--quantization", "modelopt_fp4")]
)
def test_a_flag_value_sglang_does_not_offer_is_one_error_line(
    capsys: pytest.CaptureFixture[str], flag: str, valid: str
) -> None:
    code, out, err = explain_here(capsys, "--model", str(GEMMA4_NVFP4_MOE), flag, "bogus")
    assert code == 2 and out == ""
    assert len(err) == 1, err
    release = installed_sglang()
    assert err[0].startswith(f"error: {flag} 'bogus' is not a choice of SGLang {release}; ")
    assert valid in err[0].split("choose one of: ")[1].split(", ")


@pytest.mark.release_matrix
def test_arguments_sglang_refuses_are_one_error_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    unknown = tmp_path / "unknown-model-type"
    unknown.mkdir()
    (unknown / "config.json").write_text(json.dumps({"model_type": "no-such-model"}))
    code, out, err = explain_here(capsys, "--model", str(unknown))
    assert code == 2 and out == ""
    assert len(err) == 1 and err[0].startswith(
        f"error: SGLang {installed_sglang()} refuses these server arguments for {unknown}"
    )
    assert "no-such-model" in err[0]


def test_a_backend_sglang_refuses_for_gemma4_is_one_error_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = explain_here(
        capsys, "--model", str(GEMMA4_NVFP4_MOE), "--attention-backend", "flashinfer"
    )
    assert code == 2 and out == ""
    assert len(err) == 1 and "refuses these server arguments" in err[0] and "Gemma4" in err[0]


@pytest.mark.parametrize("importing", [r"torch(\.|$)", r"transformers(\.|$)", r"sglang\.srt(\.|$)"])
def test_ctrl_c_during_imports_is_one_line_and_exit_130(importing: str) -> None:
    """SIGINT as soon as the import trace shows the process inside that package's import."""
    trigger = re.compile(rf"^import time:.*\| +{importing}")
    environment = {k: v for k, v in os.environ.items() if not k.startswith("SGLANG_NVFP4")}
    command = ["-X", "importtime", "-m", "sglang_nvfp4_patches", "explain"]
    process = subprocess.Popen(
        [sys.executable, *command, "--model", str(LLAMA4_NVFP4)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
    )
    assert process.stderr is not None
    for line in process.stderr:
        if trigger.match(line):
            process.send_signal(signal.SIGINT)
            break
    else:
        pytest.fail(f"the import trace never showed {importing}")
    out, err = process.communicate(timeout=120)
    ours = [line for line in err.splitlines() if not line.startswith("import time:")]
    assert process.returncode == 130, ours
    assert ours == ["interrupted"]
    assert out == ""
