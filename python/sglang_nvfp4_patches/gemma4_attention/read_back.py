"""What ``doctor`` reads back of ``gemma4-attention``: SGLang's state now, the verdict alone
where nothing is installed, and SGLang's own resolution of the bundled config."""

from __future__ import annotations

import dataclasses

from sglang_nvfp4_patches.gemma4_attention.rule import (
    AFFECTED_BACKEND,
    FIXED_NOTE,
    NAME,
    SAFE_BACKEND,
    Gemma4Mode,
)
from sglang_nvfp4_patches.gemma4_attention.rule_state import (
    current_mode,
    kv_scale_verdict,
    verdict_phrase,
)
from sglang_nvfp4_patches.patch_report import PatchReport, PatchState
from sglang_nvfp4_patches.server_args_seam import hooks


def already_upstream() -> PatchReport:
    evidence = kv_scale_verdict().evidence
    return PatchReport(NAME, PatchState.ALREADY_UPSTREAM, f"{FIXED_NOTE}: {evidence}")


def _rule_summary(mode: Gemma4Mode) -> str:
    verdict = kv_scale_verdict()
    if mode is Gemma4Mode.FORCED:
        return (
            "forced by SGLANG_NVFP4_PATCHES_FORCE=gemma4-attention (here "
            f"{verdict.evidence}); NVFP4 MoE on SM10X defaults to triton unless an attention "
            "backend is given"
        )
    return (
        f"{verdict_phrase(verdict)}; NVFP4 MoE with an FP8 KV cache on SM10X defaults to "
        "triton unless an attention backend is given"
    )


def current_state() -> PatchReport:
    """What SGLang holds now (not what ``install`` believes it did)."""
    mode = current_mode()
    if mode in (None, Gemma4Mode.FIXED):
        if not kv_scale_verdict().bug_live:
            return already_upstream()
        return PatchReport(NAME, PatchState.FAILED, "the rule was never installed")
    if hooks.times_asked(NAME) == 1:
        return PatchReport(NAME, PatchState.APPLIED, f"{hooks.where()}: {_rule_summary(mode)}")
    return PatchReport(NAME, PatchState.FAILED, f"not installed in the {hooks.where()}")


def unpatched_report() -> PatchReport:
    """The verdict alone, where nothing is installed."""
    verdict = kv_scale_verdict()
    if not verdict.bug_live:
        return already_upstream()
    return PatchReport(
        NAME,
        PatchState.NOT_PATCHED,
        f"{verdict_phrase(verdict)}; Gemma 4 NVFP4 MoE with an FP8 KV cache on SM10X keeps "
        f"{AFFECTED_BACKEND}",
    )


def bundled_on_sm100(attention_backend: str | None = None) -> str | None:
    """The attention backend SGLang resolves the bundled Gemma 4 NVFP4 MoE config (FP8 KV
    cache) to on a simulated SM100."""
    from sglang_nvfp4_patches.simulation.bundled import GEMMA4_NVFP4_MOE
    from sglang_nvfp4_patches.simulation.gpus import GPU_PROFILES
    from sglang_nvfp4_patches.simulation.server_args import resolve

    sm100 = GPU_PROFILES["sm100"]
    return resolve(GEMMA4_NVFP4_MOE, sm100, attention_backend=attention_backend).attention_backend


def verified_state() -> PatchReport:
    """``doctor``: registered is not enough; SGLang must resolve the bundled config on a
    simulated SM100 to triton where the rule acts, to trtllm_mha where the fix is upstream."""
    report = current_state()
    expected = {PatchState.APPLIED: SAFE_BACKEND, PatchState.ALREADY_UPSTREAM: AFFECTED_BACKEND}
    if report.state not in expected:
        return report
    got = bundled_on_sm100()
    if got != expected[report.state]:
        return PatchReport(
            report.name,
            PatchState.FAILED,
            f"{report.reason}, yet SGLang resolves the bundled NVFP4 MoE config on simulated "
            f"SM100 to {got}, not {expected[report.state]}",
        )
    return dataclasses.replace(
        report, reason=f"{report.reason} (verified: SGLang resolves it to {got} on SM100)"
    )
