"""What ``doctor`` says of ``nvfp4-moe-runner`` from a record's facts: applied where the
evidence is live (naming where and why, one clause per family and state), upstream or not
applicable where nothing fails, ``unknown`` (run verify) wherever the evidence cannot tell."""

from __future__ import annotations

from typing import Any

from sglang_nvfp4_patches.nvfp4_moe_runner.read_back import summary
from sglang_nvfp4_patches.status import PatchState


def facts(**states: str) -> dict[str, Any]:
    """``llama_sm120="live"`` -> ``{"Llama 4 on sm120": {...}}``."""
    found = {}
    for key, state in states.items():
        family, gpu = key.split("_")
        name = {"llama": "Llama 4", "gemma": "Gemma 4"}[family]
        found[f"{name} on {gpu}"] = {"state": state, "detail": f"{name} {gpu} {state}"}
    return found


def test_live_evidence_is_applied_and_says_where_in_a_fixed_order() -> None:
    report = summary(
        facts(
            gemma_sm121="live", llama_sm120="live", llama_sm100="live", gemma_sm100="not affected"
        ),
        "CI",
        PatchState.APPLIED,
    )
    assert report.state is PatchState.APPLIED
    assert report.reason == (
        "with no MoE runner given, Llama 4 on sm100, sm120 gets flashinfer_cutlass (Llama 4 "
        "sm100 live); Gemma 4 on sm121 gets flashinfer_cutlass (Gemma 4 sm121 live); Gemma 4 "
        "on sm100 is not affected (Gemma 4 sm100 not affected) (evidence: CI)"
    )


def test_where_nothing_is_patched_a_live_failure_is_not_patched() -> None:
    report = summary(facts(llama_sm120="live"), "CI", PatchState.NOT_PATCHED)
    assert report.state is PatchState.NOT_PATCHED
    assert "Llama 4 on sm120 would get flashinfer_cutlass" in report.reason


def test_nothing_failing_is_upstream_or_not_applicable() -> None:
    upstream = summary(
        facts(llama_sm120="upstream", gemma_sm100="not affected"), "x", PatchState.APPLIED
    )
    assert upstream.state is PatchState.ALREADY_UPSTREAM
    assert "Llama 4 on sm120 is upstream (Llama 4 sm120 upstream)" in upstream.reason
    quiet = summary(
        facts(llama_sm120="not affected", gemma_sm120="no remedy"), "x", PatchState.APPLIED
    )
    assert quiet.state is PatchState.NOT_APPLICABLE
    assert "Gemma 4 on sm120 has no runner to publish" in quiet.reason


def test_evidence_that_cannot_tell_is_unknown_even_beside_a_live_failure() -> None:
    report = summary(facts(llama_sm120="live", gemma_sm120="unknown"), "x", PatchState.APPLIED)
    assert report.state is PatchState.UNKNOWN
    assert "Gemma 4 on sm120 is unknown" in report.reason
    assert report.reason.endswith("run `sglang-nvfp4-patches verify`")
