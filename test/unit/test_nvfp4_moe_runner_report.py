"""What ``doctor`` says of ``nvfp4-moe-runner`` from a record's facts: applied where the
evidence is live (naming where and why, one clause per launch line and state), upstream or
not applicable where nothing fails, ``unknown`` (run verify) wherever the evidence cannot
tell; layers no stand-in covers are named, never the patch's state."""

from __future__ import annotations

from typing import Any

from sglang_nvfp4_patches.nvfp4_moe_runner.commands import summary
from sglang_nvfp4_patches.nvfp4_moe_runner.rule import EvidenceKey
from sglang_nvfp4_patches.patch_report import PatchState

SETTINGS = {"llama": "silu, top-1", "gemma": "gelu, top-k"}
LAUNCHES = {"plain": "no --quantization", "card": "--quantization modelopt_fp4"}


def facts(**states: str) -> dict[str, Any]:
    """``llama_sm120_plain="live"`` -> ``{"silu, top-1 on sm120, no --quantization": ...}``."""
    found = {}
    for name, state in states.items():
        settings, gpu, launch = name.split("_")
        key = EvidenceKey(SETTINGS[settings], gpu, LAUNCHES[launch])
        found[key] = {"state": state, "detail": f"{settings} {gpu} {state}"}
    return found


def test_live_evidence_is_applied_and_says_where_in_a_fixed_order() -> None:
    report = summary(
        facts(
            gemma_sm121_plain="live",
            llama_sm120_plain="live",
            llama_sm100_plain="live",
            gemma_sm100_plain="not affected",
            llama_sm100_card="live",
        ),
        "CI",
        PatchState.APPLIED,
    )
    assert report.state is PatchState.APPLIED
    assert report.reason == (
        "ModelOpt NVFP4 MoE layers, any architecture, with no MoE runner given and no "
        "--quantization: gelu, top-k on sm121; silu, top-1 on sm100, sm120 get "
        "flashinfer_cutlass (gemma sm121 live); no --quantization: gelu, top-k on sm100 are "
        "not affected (gemma sm100 not affected); --quantization modelopt_fp4: silu, top-1 on "
        "sm100 get flashinfer_cutlass (llama sm100 live) (evidence: CI)"
    )


def test_where_nothing_is_patched_a_live_failure_is_not_patched() -> None:
    report = summary(facts(llama_sm120_plain="live"), "CI", PatchState.NOT_PATCHED)
    assert report.state is PatchState.NOT_PATCHED
    assert "silu, top-1 on sm120 would get flashinfer_cutlass" in report.reason


def test_nothing_failing_is_upstream_or_not_applicable() -> None:
    upstream = summary(
        facts(llama_sm120_plain="upstream", gemma_sm100_plain="not affected"),
        "x",
        PatchState.APPLIED,
    )
    assert upstream.state is PatchState.ALREADY_UPSTREAM
    assert "silu, top-1 on sm120 are upstream (llama sm120 upstream)" in upstream.reason
    quiet = summary(
        facts(llama_sm120_plain="not affected", gemma_sm120_card="no remedy"),
        "x",
        PatchState.APPLIED,
    )
    assert quiet.state is PatchState.NOT_APPLICABLE
    assert "gelu, top-k on sm120 fail on every runner this plugin can publish" in quiet.reason


def test_evidence_that_cannot_tell_is_unknown_even_beside_a_live_failure() -> None:
    report = summary(
        facts(llama_sm120_plain="live", gemma_sm120_plain="unknown"), "x", PatchState.APPLIED
    )
    assert report.state is PatchState.UNKNOWN
    assert "gelu, top-k on sm120 are unknown" in report.reason
    assert report.reason.endswith("run `sglang-nvfp4-patches verify`")


def test_layers_no_stand_in_covers_are_named_but_decide_nothing() -> None:
    report = summary(
        facts(llama_sm120_plain="live", gemma_sm100_plain="not covered"), "x", PatchState.APPLIED
    )
    assert report.state is PatchState.APPLIED
    assert "gelu, top-k on sm100 are not covered" in report.reason
