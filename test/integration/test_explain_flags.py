"""``explain`` on input only SGLang can judge, and Ctrl-C while SGLang is being imported.

Flag checks run ``cli.main`` in this process (SGLang already imported, plugin loaded by
SGLang); Ctrl-C during the imports needs a fresh ``python -m sglang_nvfp4_patches``. Server
flags go to SGLang's own parser; the reference answers below are built from that parser and
``ServerArgs.from_cli_args`` directly, as ``sglang serve`` builds its record.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from sglang_nvfp4_patches import cli
from sglang_nvfp4_patches.explain.input import CONFIG_NAME
from sglang_nvfp4_patches.explain.run import patches_suspended, server_flags
from sglang_nvfp4_patches.server_args_seam.launch import Launch, quant_config_of
from sglang_nvfp4_patches.simulation.bundled import QWEN3_MOE_NVFP4
from sglang_nvfp4_patches.simulation.gpus import GPU_PROFILES, simulated_gpu
from sglang_nvfp4_patches.simulation.scheduler import moe_layer_build_on
from sglang_nvfp4_patches.simulation.server_args import quiet_sglang, resolved_server_args
from sglang_nvfp4_patches.supported_releases import sglang_version
from support.configs import GEMMA4_NVFP4_MOE, LLAMA4_NVFP4, family_config, merged
from support.release import MOE_RUNNER_MISMATCH, ships


def explain_here(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, list[str]]:
    code = cli.main(["explain", "--gpu", "sm100", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err.splitlines()


@pytest.mark.release_matrix
@pytest.mark.parametrize(
    ("flag", "valid"), [("--attention-backend", "triton"), ("--quantization", "modelopt_fp4")]
)
def test_a_flag_value_sglang_does_not_offer_is_one_error_line_in_its_words(
    capsys: pytest.CaptureFixture[str], flag: str, valid: str
) -> None:
    code, out, err = explain_here(capsys, "--model", str(GEMMA4_NVFP4_MOE), flag, "bogus")
    assert code == 2 and out == ""
    assert len(err) == 1, err
    release = sglang_version()
    assert err[0].startswith(
        f"error: sglang serve (SGLang {release}): argument {flag}: invalid choice: 'bogus'"
    )
    assert f"'{valid}'" in err[0]


def test_an_unknown_flag_is_refused_before_sglangs_parser(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Neither our options nor SGLang's flags (read from its sources): refused at once."""
    with pytest.raises(SystemExit) as stopped:
        cli.main(["explain", "--model", str(LLAMA4_NVFP4), "--no-such-flag", "3"])
    err = capsys.readouterr().err.splitlines()
    assert stopped.value.code == 2
    assert err[-1].endswith("explain: error: unrecognized arguments: --no-such-flag")


def _sglang_serve_answer(model: Path, *flags: str) -> tuple[str, ...]:
    """What SGLang resolves for ``sglang serve --model-path MODEL FLAGS`` on a simulated SM100,
    built by SGLang's own parser and ``from_cli_args``, without the plugin's patches."""
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    words = ["--model-path", str(model), "--skip-tokenizer-init", "--device", "cuda", *flags]
    with (
        patches_suspended(),
        simulated_gpu(GPU_PROFILES["sm100"]),
        contextlib.redirect_stderr(io.StringIO()),
    ):
        server_args = ServerArgs.from_cli_args(parser.parse_args(words))
        if hasattr(server_args, "resolve_once"):
            server_args.resolve_once()
    # 0.5.20+ keep the user's record as given and publish the resolved values separately.
    resolved = server_args.resolved_dict() if hasattr(server_args, "resolved_dict") else {}
    return tuple(
        resolved.get(name, getattr(server_args, name))
        for name in ("attention_backend", "moe_runner_backend")
    )


@pytest.mark.release_matrix
@pytest.mark.parametrize(
    "flags",
    [
        ("--moe-runner-backend", "flashinfer_cutlass", "--tp-size", "2"),
        ("--attention-backend", "triton", "--kv-cache-dtype", "fp8_e4m3"),
        (
            "--quantization",
            "modelopt_fp4",
            "--enable-dp-attention",
            "--dp-size",
            "2",
            "--tp-size",
            "2",
        ),
    ],
)
def test_any_server_flag_gives_sglangs_answer_for_that_command_line(
    capsys: pytest.CaptureFixture[str], flags: tuple[str, ...]
) -> None:
    code, out, err = explain_here(capsys, "--model", str(LLAMA4_NVFP4), "--json", *flags)
    assert code == 0, err
    (row,) = [json.loads(line) for line in out.splitlines()]
    expected = _sglang_serve_answer(LLAMA4_NVFP4, *flags)
    assert (row["unpatched_attention_backend"], row["unpatched_moe_runner_backend"]) == expected
    runner_given = "--moe-runner-backend" in flags
    if runner_given or not ships(MOE_RUNNER_MISMATCH):  # SGLang's answer, field for field
        assert (row["attention_backend"], row["moe_runner_backend"]) == expected
        assert row["decided_by"] == ("user" if "--attention-backend" in flags else "sglang")
        return
    # no runner given (with or without the model cards' --quantization modelopt_fp4):
    # nvfp4-moe-runner publishes the one Llama 4's layer serves on SM100
    assert (row["attention_backend"], row["moe_runner_backend"]) == (
        expected[0],
        "flashinfer_cutlass",
    )
    assert row["decided_by"] == "nvfp4-moe-runner"


@pytest.mark.parametrize(
    ("config", "field", "holds"),
    [
        ({"model_type": "gemma4"}, "architectures", "missing here"),
    ],
)
def test_a_config_sglang_cannot_read_is_one_line_naming_the_field(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, config: dict, field: str, holds: str
) -> None:
    if "model_type" not in config:  # an edit of the real NVFP4 MoE stand-in
        config = {**json.loads((GEMMA4_NVFP4_MOE / "config.json").read_text()), **config}
    (tmp_path / "config.json").write_text(json.dumps(config))
    code, out, err = explain_here(capsys, "--model", str(tmp_path))
    assert (code, out) == (2, ""), err
    assert len(err) == 1, err
    assert err[0].startswith(f"error: SGLang {sglang_version()} cannot read {tmp_path}/config")
    assert f'field "{field}" ({holds})' in err[0] and "SGLang reads it as `" in err[0]


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
        f"error: SGLang {sglang_version()} refuses these server arguments for {unknown}"
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


@pytest.mark.parametrize("source", [GEMMA4_NVFP4_MOE, LLAMA4_NVFP4], ids=["gemma4", "llama4"])
def test_a_null_text_config_is_read_as_transformers_reads_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, source: Path
) -> None:
    """``"text_config": null`` is the model's default text config to transformers: explain
    answers for it (it was exit 70, an AttributeError in the plugin's own code)."""
    config = {**json.loads((source / "config.json").read_text()), "text_config": None}
    (tmp_path / "config.json").write_text(json.dumps(config))
    code, out, err = explain_here(capsys, "--model", str(tmp_path), "--json")
    assert code == 0, err
    (row,) = [json.loads(line) for line in out.splitlines()]
    assert row["gpu"] == "sm100" and row["attention_backend"], row


def test_every_flag_of_sglangs_parser_passes_the_fast_unknown_option_check() -> None:
    """``cli`` refuses an unknown option before importing SGLang, reading SGLang's flags from
    its sources as text; a flag that reading missed would refuse a valid server flag. The
    reference is SGLang's own parser."""
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    flags = [f for f in parser._option_string_actions if f.startswith("--")]
    assert len(flags) > 100
    missed = [f for f in flags if not any(known.startswith(f) for known in cli._sglang_flags())]
    assert missed == []


def test_explain_exits_1_only_where_a_patch_failed(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Exit 1 means one thing for explain: a patch failed to apply in this process. A layer
    that fails with and without the patches (the operator's runner has no kernels for the GPU)
    is a note, exit 0 (once the docs said explain exits 1 for a live bug; it never did)."""
    from sglang_nvfp4_patches.explain import run
    from sglang_nvfp4_patches.patch_report import PatchReport, PatchState
    from sglang_nvfp4_patches.simulation.bundled import QWEN3_MOE_NVFP4

    argv = ["explain", "--json", "--model", str(QWEN3_MOE_NVFP4), "--gpu", "sm120"]
    argv += ["--moe-runner-backend", "flashinfer_trtllm"]
    assert cli.main(argv) == 0
    row = json.loads(capsys.readouterr().out)
    assert row["moe_layer_fails"] and row["unpatched_fails_at_warmup"], row
    reports = run.plugin_reports()
    name = next(iter(reports))
    failed = {**reports, name: PatchReport(name, PatchState.FAILED, "planted")}
    monkeypatch.setattr(run, "plugin_reports", lambda: failed)
    assert cli.main(argv) == 1
    assert f"error: {name} failed: planted" in capsys.readouterr().err


def _scheduler_starts(model: Path, *flags: str) -> bool:
    """Whether SGLang resolves ``flags`` for ``model`` on a simulated SM100 and a scheduler
    publishes them and sets up its MoE settings (SGLang's own code, without the patches)."""
    try:
        with (
            patches_suspended(),
            quiet_sglang(),
            moe_layer_build_on("sm100", model, **server_flags(flags)),
        ):
            return True
    except (ValueError, AssertionError, ZeroDivisionError):
        return False


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (("--attn-dp-size", "0", "--kv-cache-dtype", "fp8_e4m3"), "--attn-dp-size 0"),
        (("--dcp-size", "0"), "--dcp-size 0"),
        (("--attn-cp-size", "0"), "--attn-cp-size 0"),  # SGLang divides by it
    ],
)
def test_a_flag_sglang_fails_on_is_named_by_the_flag_not_the_config(
    capsys: pytest.CaptureFixture[str], flags: tuple[str, ...], named: str
) -> None:
    """``--attn-cp-size 0`` once read "cannot read .../config.json: a field it reads"."""
    assert not _scheduler_starts(QWEN3_MOE_NVFP4, *flags)
    served = [word for word in flags if word not in named.split()]
    assert _scheduler_starts(QWEN3_MOE_NVFP4, *served)  # ... and SGLang takes it without
    code, out, err = explain_here(capsys, "--model", str(QWEN3_MOE_NVFP4), *flags)
    assert (code, out) == (2, "") and len(err) == 1, err
    assert err[0].startswith(f"error: {named}: SGLang {sglang_version()} "), err
    assert CONFIG_NAME not in err[0] and err[0].endswith("change or drop it"), err


@pytest.mark.parametrize(
    ("quantization", "field", "expected"),
    [
        ({"quant_algo": "nvfp4"}, "quant_algo", "NVFP4"),
        ({"quant_method": "ModelOpt"}, "quant_method", "modelopt"),
    ],
)
def test_a_modelopt_name_sglang_misreads_is_named_with_what_it_matches(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    quantization: dict[str, str],
    field: str,
    expected: str,
) -> None:
    """A flag beside it is not blamed: SGLang fails on the checkpoint without it too."""
    config = merged(QWEN3_MOE_NVFP4, {"quantization_config": quantization})
    (tmp_path / CONFIG_NAME).write_text(json.dumps(config))
    with (
        patches_suspended(),
        simulated_gpu(GPU_PROFILES["sm100"]),
        quiet_sglang(),
        pytest.raises(ValueError, match="ModelOpt"),
    ):  # SGLang's model loader fails on its quantization config
        quant_config_of(Launch.resolved(resolved_server_args(tmp_path)).model_config)
    code, out, err = explain_here(capsys, "--model", str(tmp_path), "--tp-size", "2")
    assert (code, out) == (2, "") and len(err) == 1, err
    value = json.dumps(quantization[field])
    assert err[0].startswith(
        f"error: SGLang {sglang_version()} cannot read {tmp_path / CONFIG_NAME}: field "
        f'"quantization_config.{field}" is the string {value}; '
    ), err
    assert err[0].endswith(f'set it to "{expected}"'), err


@pytest.mark.parametrize(
    ("architecture", "edit", "field"),
    [
        ("Qwen3MoeForCausalLM", {"num_experts": 1, "num_experts_per_tok": 1}, "num_experts"),
        ("HunYuanMoEV1ForCausalLM", {"num_experts": 1}, "num_experts"),
    ],
)
def test_an_expert_count_read_as_no_moe_layer_is_said(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    architecture: str,
    edit: dict[str, int],
    field: str,
) -> None:
    """Not refused (SGLang serves it: a layer of one expert, or Hunyuan's dense layers), and
    the row says what explain read."""
    (tmp_path / CONFIG_NAME).write_text(json.dumps(family_config(architecture, edit)))
    code, out, err = explain_here(capsys, "--model", str(tmp_path), "--json")
    assert code == 0, err
    (row,) = [json.loads(line) for line in out.splitlines()]
    said = f'{tmp_path}: field "{field}" is 1: explain reads no MoE layer (fewer than 2 experts)'
    assert said in row["note"], row["note"]


@pytest.mark.skipif(
    not ships(MOE_RUNNER_MISMATCH), reason=f"the patch acts from {MOE_RUNNER_MISMATCH} only"
)
def test_a_launch_the_plugin_refuses_is_a_refused_row(capsys: pytest.CaptureFixture[str]) -> None:
    """``--quantization modelopt`` once ended in an internal error (exit 70): explain built the
    patched layer of a launch the plugin refuses before the weights load."""
    code, out, err = explain_here(
        capsys, "--model", str(LLAMA4_NVFP4), "--json", "--quantization", "modelopt"
    )
    assert code == 0, err
    (row,) = [json.loads(line) for line in out.splitlines()]
    assert row["launch_refused"].startswith("[nvfp4-moe-runner]"), row
    assert "Launch it with --quantization modelopt_fp4 instead" in row["launch_refused"]
