"""The pure Gemma 4 decision, case by case (no SGLang import).

Most cases run in ``LIVE`` mode (the root cause present, FP8 KV cache), where #26791's rule
acts; the mode and KV-cache cases at the end cover where it must stand down.
"""

from __future__ import annotations

import pytest

from sglang_nvfp4_patches.gemma4_attention.rule import (
    Gemma4Facts,
    Gemma4Mode,
    decide_gemma4_attention,
    kv_cache_is_fp8,
    override_hint,
    why_triton,
)
from sglang_nvfp4_patches.models import GEMMA4_ARCHITECTURES

AFFECTED = dict(
    architecture="Gemma4ForConditionalGeneration",
    quantization="modelopt_fp4",
    enable_moe_block=True,
    compute_capability_major=10,
)


def decide(mode: Gemma4Mode = Gemma4Mode.LIVE, **changes: object):
    return decide_gemma4_attention(Gemma4Facts(**{**AFFECTED, **changes}), mode)


@pytest.mark.parametrize("architecture", sorted(GEMMA4_ARCHITECTURES))
def test_affected_combination_defaults_to_triton(architecture: str) -> None:
    decision = decide(architecture=architecture)
    assert decision.attention_backend == "triton"
    assert decision.warning is None
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
    assert decision.attention_backend is None
    assert decision.warning is None


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
    backend = decide(enable_moe_block=value).attention_backend
    assert (backend == "triton") is affected


def test_explicit_trtllm_mha_is_honoured_with_a_warning() -> None:
    decision = decide(attention_backend="trtllm_mha")
    assert decision.attention_backend is None
    assert decision.warning is not None
    # names the cause and both ways out
    assert "drops the FP8 KV-cache scales" in decision.warning
    assert "--attention-backend triton" in decision.warning
    assert "--kv-cache-dtype bfloat16" in decision.warning


@pytest.mark.parametrize("backend", ["triton", "flashinfer", "fa4"])
def test_other_explicit_backends_are_honoured_silently(backend: str) -> None:
    decision = decide(attention_backend=backend)
    assert decision.attention_backend is None
    assert decision.warning is None


@pytest.mark.parametrize("side", ["prefill_attention_backend", "decode_attention_backend"])
@pytest.mark.parametrize("given", ["trtllm_mha", "flashinfer"])
def test_one_split_side_gets_triton_for_the_other(side: str, given: str) -> None:
    decision = decide(**{side: given})
    assert decision.attention_backend == "triton"
    assert (decision.warning is not None) is (given == "trtllm_mha")


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
    assert decision.attention_backend is None
    assert (decision.warning is not None) is warn


def test_split_sides_do_not_matter_when_attention_backend_is_given() -> None:
    decision = decide(attention_backend="triton", prefill_attention_backend="trtllm_mha")
    assert decision.attention_backend is None
    assert decision.warning is not None


# ---------------------------------------------------------------- root cause, KV cache, FORCE

FLAG_SETS = [
    {},
    {"attention_backend": "trtllm_mha"},
    {"attention_backend": "triton"},
    {"prefill_attention_backend": "trtllm_mha"},
    {"decode_attention_backend": "flashinfer"},
]


@pytest.mark.parametrize("flags", FLAG_SETS, ids=str)
@pytest.mark.parametrize("kv_cache_fp8", [True, False, None])
def test_fixed_root_cause_declares_and_warns_nothing(flags: dict, kv_cache_fp8: object) -> None:
    decision = decide(Gemma4Mode.FIXED, kv_cache_fp8=kv_cache_fp8, **flags)
    assert decision.attention_backend is None
    assert decision.warning is None
    assert "sglang#28144" in decision.reason


@pytest.mark.parametrize("flags", FLAG_SETS, ids=str)
def test_live_root_cause_without_fp8_kv_cache_leaves_sglang_alone(flags: dict) -> None:
    decision = decide(Gemma4Mode.LIVE, kv_cache_fp8=False, **flags)
    assert decision.attention_backend is None
    assert decision.warning is None
    assert "not FP8" in decision.reason


def test_unknown_kv_cache_counts_as_fp8_where_the_bug_is_live() -> None:
    assert decide(Gemma4Mode.LIVE, kv_cache_fp8=None).attention_backend == "triton"


@pytest.mark.parametrize("kv_cache_fp8", [True, False, None])
def test_forced_applies_the_rule_26791_whatever_the_kv_cache(kv_cache_fp8: object) -> None:
    decision = decide(Gemma4Mode.FORCED, kv_cache_fp8=kv_cache_fp8)
    assert decision.attention_backend == "triton"
    assert "SGLANG_NVFP4_PATCHES_FORCE" in decision.reason


def test_forced_honours_an_explicit_backend_and_says_so_for_trtllm_mha() -> None:
    assert decide(Gemma4Mode.FORCED, attention_backend="flashinfer").warning is None
    decision = decide(Gemma4Mode.FORCED, attention_backend="trtllm_mha")
    assert decision.attention_backend is None
    assert decision.warning is not None and "SGLANG_NVFP4_PATCHES_FORCE" in decision.warning


@pytest.mark.parametrize("mode", list(Gemma4Mode))
@pytest.mark.parametrize(
    "changes",
    [{"quantization": None}, {"enable_moe_block": False}, {"compute_capability_major": 12}],
    ids=str,
)
def test_forced_is_exactly_as_narrow_as_the_rule(mode: Gemma4Mode, changes: dict) -> None:
    decision = decide(mode, attention_backend="trtllm_mha", **changes)
    assert decision.attention_backend is None
    assert decision.warning is None


@pytest.mark.parametrize(
    ("flag", "checkpoint", "fp8"),
    [
        ("auto", "FP8", True),
        ("auto", "fp8", True),
        (None, "FP8", True),
        ("auto", None, False),
        ("auto", "auto", False),
        ("auto", "NVFP4", False),
        ("auto", 8, False),
        ("fp8_e4m3", None, True),
        ("fp8_e5m2", "auto", True),
        ("bfloat16", "FP8", False),
        ("bf16", "FP8", False),
        ("fp4_e2m1", "FP8", False),
    ],
)
def test_kv_cache_dtype_follows_flag_then_checkpoint(
    flag: object, checkpoint: object, fp8: bool
) -> None:
    assert kv_cache_is_fp8(flag, checkpoint) is fp8


def test_mxfp8_is_an_fp8_kv_cache() -> None:
    assert kv_cache_is_fp8("mxfp8", None) is True
    assert kv_cache_is_fp8("MXFP8", "NVFP4") is True


# ---------------------------------------------------------------- what the operator reads

LIVE_REASON = (
    "this SGLang's trtllm_mha drops the FP8 KV-cache scales (sglang#26518); Gemma 4 NVFP4 "
    "(modelopt_fp4) MoE on SM10X with an FP8 KV cache defaults the attention backend to triton"
)
FORCED_REASON = (
    "SGLANG_NVFP4_PATCHES_FORCE=gemma4-attention: Gemma 4 NVFP4 (modelopt_fp4) MoE on SM10X "
    "defaults the attention backend to triton"
)


@pytest.mark.parametrize(
    ("mode", "changes", "reason"),
    [
        (Gemma4Mode.LIVE, {}, LIVE_REASON),
        (Gemma4Mode.FORCED, {}, FORCED_REASON),
        (
            Gemma4Mode.LIVE,
            {"decode_attention_backend": "flashinfer"},
            LIVE_REASON + " for the split side that was not given (flashinfer was given)",
        ),
        (
            Gemma4Mode.LIVE,
            {"prefill_attention_backend": "triton", "decode_attention_backend": "flashinfer"},
            "the attention backend was given explicitly (triton, flashinfer); honoured",
        ),
        (
            Gemma4Mode.FIXED,
            {},
            "trtllm_mha applies FP8 KV-cache scales here (sglang#28144); SGLang's default stands",
        ),
        (
            Gemma4Mode.LIVE,
            {"kv_cache_fp8": False},
            "the KV cache is not FP8, so trtllm_mha's dropped FP8 KV-cache scales do not apply; "
            "SGLang's default stands",
        ),
        (
            Gemma4Mode.FORCED,
            {"compute_capability_major": 12},
            "not Gemma 4 NVFP4 MoE on SM10X; SGLang's default is unaffected",
        ),
    ],
    ids=["live", "forced", "split-side", "both-sides", "fixed", "bf16-kv-cache", "not-sm10x"],
)
def test_the_reason_reads_in_full(mode: Gemma4Mode, changes: dict, reason: str) -> None:
    assert decide(mode, **changes).reason == reason


def test_the_warnings_for_an_explicit_trtllm_mha_read_in_full() -> None:
    assert decide(Gemma4Mode.LIVE, attention_backend="trtllm_mha").warning == (
        "trtllm_mha is honoured as given, but this SGLang's trtllm_mha drops the FP8 KV-cache "
        "scales (sglang#26518; fixed upstream in sglang#28144): Gemma 4 NVFP4 MoE loses accuracy "
        "with it (MMLU 0.622 -> 0.037 in one report). Use --attention-backend triton or "
        "--kv-cache-dtype bfloat16"
    )
    assert decide(Gemma4Mode.FORCED, attention_backend="trtllm_mha").warning == (
        "trtllm_mha is honoured as given although SGLANG_NVFP4_PATCHES_FORCE=gemma4-attention "
        "asks for the triton default"
    )


@pytest.mark.parametrize(
    ("mode", "why", "hint"),
    [
        (
            Gemma4Mode.LIVE,
            "which drops the FP8 KV-cache scales on this SGLang (sglang#26518; fixed upstream in "
            "sglang#28144)",
            "pass --attention-backend trtllm_mha to override (after checking accuracy), or set "
            "SGLANG_NVFP4_PATCHES_DISABLE=gemma4-attention",
        ),
        (
            Gemma4Mode.FORCED,
            "although SGLANG_NVFP4_PATCHES_FORCE=gemma4-attention asks for triton",
            "pass --attention-backend trtllm_mha to override, or unset SGLANG_NVFP4_PATCHES_FORCE",
        ),
    ],
)
def test_why_triton_and_how_to_override_read_in_full(mode: Gemma4Mode, why: str, hint: str) -> None:
    assert why_triton(mode) == why
    assert override_hint(mode) == hint
