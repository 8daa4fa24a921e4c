"""``explain``'s input checks and its reading of the plugin's reports (no SGLang import)."""

from __future__ import annotations

import pytest

from sglang_nvfp4_patches.errors import UsageError
from sglang_nvfp4_patches.explain import patch_outcome
from sglang_nvfp4_patches.explain_input import architecture, check_choices
from sglang_nvfp4_patches.status import PatchReport, PatchState

CHOICES = {"attention_backend": ("triton", "trtllm_mha"), "quantization": ("modelopt_fp4",)}


def test_a_value_outside_sglangs_choices_is_refused_with_the_choices() -> None:
    with pytest.raises(UsageError) as caught:
        check_choices({"--attention-backend": "bogus"}, CHOICES, "0.5.99")
    assert str(caught.value) == (
        "--attention-backend 'bogus' is not a choice of SGLang 0.5.99; "
        "choose one of: triton, trtllm_mha"
    )


@pytest.mark.parametrize(
    "flags",
    [
        {"--attention-backend": "triton", "--quantization": "modelopt_fp4"},
        {"--attention-backend": None, "--quantization": None},
        {"--kv-cache-dtype": "anything"},  # no fixed choices in SGLang: SGLang accepts it
    ],
)
def test_values_sglang_accepts_pass(flags: dict[str, str | None]) -> None:
    check_choices(flags, CHOICES, "0.5.99")


def test_the_second_flag_is_checked_too() -> None:
    with pytest.raises(UsageError, match="--quantization 'fp5'"):
        check_choices({"--attention-backend": "triton", "--quantization": "fp5"}, CHOICES, "x")


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


def test_a_plugin_sglang_did_not_load_is_said() -> None:
    live, lines = patch_outcome({})
    assert live is False
    assert lines == [
        "note: no patch is applied (SGLang did not load the plugin; see doctor); "
        "showing SGLang's own answer"
    ]
