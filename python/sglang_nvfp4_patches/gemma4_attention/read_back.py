"""What ``doctor`` reads back of ``gemma4-attention``: what SGLang holds now, the probe
read-only where nothing is installed, and SGLang's own resolution of the bundled config."""

from __future__ import annotations

from sglang_nvfp4_patches.gemma4_attention import NAME, backend_source
from sglang_nvfp4_patches.gemma4_attention.rule import (
    AFFECTED_BACKEND,
    ROOT_CAUSE_ISSUE,
    SAFE_BACKEND,
    Gemma4Mode,
    fixed_note,
)
from sglang_nvfp4_patches.gemma4_attention.rule_state import QUESTION, current_mode
from sglang_nvfp4_patches.server_args_seam import hooks
from sglang_nvfp4_patches.status import PatchReport, PatchState


def already_upstream() -> PatchReport:
    verdict = backend_source.kv_scale_verdict()
    return PatchReport(NAME, PatchState.ALREADY_UPSTREAM, f"{fixed_note()}: {verdict.evidence}")


def _rule_summary(mode: Gemma4Mode) -> str:
    verdict = backend_source.kv_scale_verdict()
    if mode is Gemma4Mode.FORCED:
        return (
            "forced by SGLANG_NVFP4_PATCHES_FORCE=gemma4-attention (here "
            f"{verdict.evidence}); NVFP4 MoE on SM10X defaults to triton unless an attention "
            "backend is given"
        )
    return (
        f"{backend_source.verdict_phrase(verdict)} ({ROOT_CAUSE_ISSUE}); NVFP4 MoE with an FP8 KV "
        "cache on SM10X defaults to triton unless an attention backend is given"
    )


def current_state() -> PatchReport:
    """What SGLang holds now (not what ``install`` believes it did)."""
    mode = current_mode()
    if mode is None or mode is Gemma4Mode.FIXED:
        if not backend_source.kv_scale_verdict().bug_live:
            return already_upstream()
        return PatchReport(NAME, PatchState.FAILED, "the rule was never installed")
    if hooks.times_asked(QUESTION) == 1:
        return PatchReport(NAME, PatchState.APPLIED, f"{hooks.where()}: {_rule_summary(mode)}")
    return PatchReport(NAME, PatchState.FAILED, f"not installed in the {hooks.where()}")


def unpatched_report() -> PatchReport:
    """The root-cause probe, read-only, where nothing is installed."""
    verdict = backend_source.kv_scale_verdict()
    if not verdict.bug_live:
        return already_upstream()
    return PatchReport(
        NAME,
        PatchState.NOT_PATCHED,
        f"{backend_source.verdict_phrase(verdict)} ({ROOT_CAUSE_ISSUE}); Gemma 4 NVFP4 MoE with "
        f"an FP8 KV cache on SM10X keeps {AFFECTED_BACKEND}",
    )


def verified_state() -> PatchReport:
    """``doctor``: registered is not enough. Ask SGLang to resolve the bundled NVFP4 MoE config
    (FP8 KV cache) on a simulated SM100 and check the answer: triton where the rule acts,
    SGLang's own trtllm_mha where the root cause is fixed upstream."""
    report = current_state()
    if report.state is PatchState.APPLIED:
        expected = SAFE_BACKEND
    elif report.state is PatchState.ALREADY_UPSTREAM:
        expected = AFFECTED_BACKEND
    else:
        return report
    from sglang_nvfp4_patches.simulation.bundled import EXAMPLES_DIR
    from sglang_nvfp4_patches.simulation.gpus import GPU_PROFILES
    from sglang_nvfp4_patches.simulation.server_args import resolve

    resolved = resolve(EXAMPLES_DIR / "gemma-4-26b-a4b-nvfp4", GPU_PROFILES["sm100"])
    if resolved.attention_backend != expected:
        return PatchReport(
            report.name,
            PatchState.FAILED,
            f"{report.reason}, yet SGLang resolves the bundled NVFP4 MoE config on simulated "
            f"SM100 to {resolved.attention_backend}, not {expected}",
        )
    return PatchReport(
        report.name,
        report.state,
        f"{report.reason} (verified: SGLang resolves it to {expected} on SM100)",
    )
