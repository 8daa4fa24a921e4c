"""The pure Gemma 4 decision, case by case (no SGLang import)."""

from __future__ import annotations

import pytest

from sglang_nvfp4_patches.gemma4_attention_rule import (
    GEMMA4_ARCHITECTURES,
    Gemma4Action,
    Gemma4Facts,
    decide_gemma4_attention,
)

AFFECTED = dict(
    architecture="Gemma4ForConditionalGeneration",
    quantization="modelopt_fp4",
    enable_moe_block=True,
    compute_capability_major=10,
)


def decide(**changes: object):
    return decide_gemma4_attention(Gemma4Facts(**{**AFFECTED, **changes}))


@pytest.mark.parametrize("architecture", sorted(GEMMA4_ARCHITECTURES))
def test_affected_combination_defaults_to_triton(architecture: str) -> None:
    decision = decide(architecture=architecture)
    assert decision.action is Gemma4Action.USE_TRITON
    assert decision.attention_backend == "triton"
    assert not decision.warn_explicit_trtllm
    assert "triton" in decision.reason


@pytest.mark.parametrize(
    "changes",
    [
        {"quantization": None},  # BF16 MoE
        {"quantization": "fp8"},
        {"enable_moe_block": False},  # NVFP4 dense
        {"compute_capability_major": 9},
        {"compute_capability_major": 12},
        {"compute_capability_major": None},  # no GPU seen
        {"architecture": "Llama4ForConditionalGeneration"},
        {"architecture": "Gemma3ForConditionalGeneration"},
    ],
)
def test_everything_else_is_left_to_sglang(changes: dict[str, object]) -> None:
    decision = decide(**changes)
    assert decision.action is Gemma4Action.LEAVE
    assert decision.attention_backend is None
    assert not decision.warn_explicit_trtllm


@pytest.mark.parametrize(
    ("value", "affected"),
    [
        (None, False),
        (False, False),
        (0, False),
        ("", False),
        (True, True),
        (1, True),
        ("yes", True),
    ],
)
def test_enable_moe_block_is_read_with_bool(value: object, affected: bool) -> None:
    action = decide(enable_moe_block=value).action
    assert (action is Gemma4Action.USE_TRITON) is affected


def test_explicit_trtllm_mha_is_honoured_with_a_warning() -> None:
    decision = decide(attention_backend="trtllm_mha")
    assert decision.action is Gemma4Action.LEAVE
    assert decision.attention_backend is None
    assert decision.warn_explicit_trtllm


@pytest.mark.parametrize("backend", ["triton", "flashinfer", "fa4"])
def test_other_explicit_backends_are_honoured_silently(backend: str) -> None:
    decision = decide(attention_backend=backend)
    assert decision.action is Gemma4Action.LEAVE
    assert not decision.warn_explicit_trtllm


@pytest.mark.parametrize("side", ["prefill_attention_backend", "decode_attention_backend"])
@pytest.mark.parametrize("given", ["trtllm_mha", "flashinfer"])
def test_one_split_side_gets_triton_for_the_other(side: str, given: str) -> None:
    decision = decide(**{side: given})
    assert decision.action is Gemma4Action.USE_TRITON
    assert decision.attention_backend == "triton"
    assert decision.warn_explicit_trtllm is (given == "trtllm_mha")


@pytest.mark.parametrize(
    ("prefill", "decode", "warn"),
    [
        ("trtllm_mha", "triton", True),
        ("triton", "flashinfer", False),
        ("trtllm_mha", "trtllm_mha", True),
    ],
)
def test_both_split_sides_given_are_honoured(prefill: str, decode: str, warn: bool) -> None:
    decision = decide(prefill_attention_backend=prefill, decode_attention_backend=decode)
    assert decision.action is Gemma4Action.LEAVE
    assert decision.warn_explicit_trtllm is warn


def test_split_sides_do_not_matter_when_attention_backend_is_given() -> None:
    decision = decide(attention_backend="triton", prefill_attention_backend="trtllm_mha")
    assert decision.action is Gemma4Action.LEAVE
    assert decision.warn_explicit_trtllm
