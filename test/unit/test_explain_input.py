"""``explain``'s input checks and its reading of the plugin's reports (no SGLang import)."""

from __future__ import annotations

import traceback
from pathlib import Path

import pytest

from accuracy_support.special_files import fifo, sparse, within
from sglang_nvfp4_patches.cli import main
from sglang_nvfp4_patches.errors import EXIT_USAGE
from sglang_nvfp4_patches.explain.input import MAX_CONFIG_BYTES, architecture, config_problem
from sglang_nvfp4_patches.explain.run import patch_outcome
from sglang_nvfp4_patches.status import PatchReport, PatchState


def _frame(path: str, line: str) -> traceback.FrameSummary:
    return traceback.FrameSummary(path, 7, "f", line=line)


SITE = "/venv/lib/python3.11/site-packages"


def test_a_missing_field_is_named_with_the_line_that_reads_it() -> None:
    frames = [
        _frame(f"{SITE}/sglang/srt/server_args.py", "model_config = ModelConfig(...)"),
        _frame(f"{SITE}/sglang/srt/configs/model_config.py", "x = self.hf_config.architectures[0]"),
    ]
    error = TypeError("'NoneType' object is not subscriptable")
    text = config_problem(Path("m/config.json"), {"model_type": "gemma4"}, error, frames, "9.9")
    assert text == (
        'SGLang 9.9 cannot read m/config.json: field "architectures" (missing here); SGLang '
        "reads it as `x = self.hf_config.architectures[0]` "
        "(sglang/srt/configs/model_config.py:7) and fails with TypeError: 'NoneType' object "
        "is not subscriptable; fix that field (compare the checkpoint's published config.json)"
    )


@pytest.mark.parametrize(
    ("config", "line", "says"),
    [
        ({"architectures": []}, 'if config.architectures[0] == "X":', '"architectures" (an empty'),
        (
            {"quantization_config": "oops"},
            "d = self.quantization_config.to_dict()",
            "\"quantization_config\" (the string 'oops' here)",
        ),
        (  # a key nested in text_config, read with .get
            {"text_config": {"num_experts": "many"}},
            'n = int(cfg.get("num_experts"))',
            "\"num_experts\" (the string 'many' here)",
        ),
        ({"model_type": "x"}, "return helper(a, b)", "a field it reads"),
    ],
)
def test_the_field_comes_from_the_failing_line_and_the_file(
    config: dict, line: str, says: str
) -> None:
    frames = [_frame(f"{SITE}/transformers/configuration_utils.py", line)]
    text = config_problem(Path("c.json"), config, ValueError("v"), frames, "9.9")
    assert says in text and "(transformers/configuration_utils.py:7)" in text


def test_the_innermost_line_naming_a_field_wins() -> None:
    frames = [
        _frame(f"{SITE}/sglang/a.py", "q = hf_config.quantization_config"),
        _frame(f"{SITE}/sglang/b.py", "return inner(x)"),  # names nothing: skipped
    ]
    text = config_problem(Path("c.json"), {}, KeyError("k"), frames, "9.9")
    assert '"quantization_config" (missing here)' in text and "(sglang/a.py:7)" in text


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"architectures": ["Gemma4ForConditionalGeneration"]}, "Gemma4ForConditionalGeneration"),
        ({"architectures": []}, None),
        ({"architectures": None}, None),
        ({"architectures": [3]}, None),
        ({}, None),
    ],
)
def test_architecture(config: dict, expected: str | None) -> None:
    assert architecture(config) == expected


def _reports(*states: PatchState, reason: str = "why") -> dict[str, PatchReport]:
    names = ("gemma4-attention", "llama4-router-weight")
    return {n: PatchReport(n, s, reason) for n, s in zip(names, states, strict=True)}


def test_an_invalid_setting_means_no_patch_and_an_error() -> None:
    live, lines = patch_outcome(_reports(PatchState.FAILED, PatchState.FAILED, reason="invalid X"))
    assert live is False
    assert lines == [
        "error: no patch is applied (gemma4-attention failed: invalid X; "
        "llama4-router-weight failed: invalid X); showing SGLang's own answer"
    ]


def test_one_applied_patch_is_live_and_a_failed_one_is_still_an_error() -> None:
    live, lines = patch_outcome(_reports(PatchState.APPLIED, PatchState.FAILED))
    assert live is True
    assert lines == ["error: llama4-router-weight failed: why"]


def test_applied_and_disabled_is_live_and_quiet() -> None:
    assert patch_outcome(_reports(PatchState.APPLIED, PatchState.DISABLED)) == (True, [])


@pytest.mark.parametrize(
    "states",
    [
        (PatchState.DISABLED, PatchState.DISABLED),
        (PatchState.NOT_APPLICABLE, PatchState.NOT_APPLICABLE),
        (PatchState.ALREADY_UPSTREAM, PatchState.NOT_APPLICABLE),
    ],
)
def test_nothing_applied_is_said_as_a_note(states: tuple[PatchState, PatchState]) -> None:
    live, lines = patch_outcome(_reports(*states))
    assert live is False
    assert len(lines) == 1 and lines[0].startswith("note: no patch is applied (gemma4-attention")


def test_a_plugin_sglang_did_not_load_is_said(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SGLANG_PLUGINS", "other_plugin")
    live, lines = patch_outcome({})
    assert live is False
    assert lines == [
        "note: no patch is applied (SGLang did not load the plugin: SGLANG_PLUGINS="
        "'other_plugin' does not name nvfp4_patches (add it there)); showing SGLang's own answer"
    ]


@pytest.mark.parametrize(
    ("case", "says"),
    [
        ("dev-zero", "config.json: is a character device, not a regular file"),
        ("fifo", "config.json: is a FIFO (named pipe), not a regular file"),
        ("huge", f"config.json: is 17 MiB, more than the {MAX_CONFIG_BYTES // 2**20} MiB"),
    ],
)
def test_a_config_json_that_is_not_a_small_regular_file_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, says: str
) -> None:
    """Read as run files are: opened without blocking, a regular file only, size-capped (a
    link to /dev/zero read to the end would eat the machine, a FIFO would hang)."""
    model = tmp_path / "model"
    model.mkdir()
    config = model / "config.json"
    if case == "dev-zero":
        config.symlink_to("/dev/zero")
    elif case == "fifo":
        fifo(config)
    else:
        sparse(config, MAX_CONFIG_BYTES + 2**20)
    assert within(10, lambda: main(["explain", "--model", str(model)])) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith(f"error: {config}: ") and says in err and len(err.splitlines()) == 1
