"""What each command calls of ``gemma4-attention``: ``install`` (where its root cause is fixed,
:func:`.rule_state.mode_for`, nothing; where it is live or forced, the rule's question,
:func:`.rule_state.answer`, is asked through the server-args seam); ``doctor`` (SGLang's state
now, the verdict alone where nothing is installed, and SGLang's own resolution of the bundled
config); ``explain``; and ``verify``: the root-cause verdict and the row it is from, and SGLang's
own resolution of the bundled Gemma 4 NVFP4 MoE config on a simulated SM100 (``triton`` where
the verdict is live, ``trtllm_mha`` where it is fixed; an explicit ``--attention-backend`` is
always the user's).
"""

from __future__ import annotations

import dataclasses

from sglang_nvfp4_patches.check_result import CheckFailed, CheckResult, NotApplicable, run_check
from sglang_nvfp4_patches.gemma4_attention.rule import (
    AFFECTED_BACKEND,
    FIXED_NOTE,
    NAME,
    SAFE_BACKEND,
    Gemma4Mode,
)
from sglang_nvfp4_patches.gemma4_attention.rule_state import (
    NO_FACTS,
    current_mode,
    kv_scale_verdict,
    mode_for,
    set_mode,
    verdict_phrase,
)
from sglang_nvfp4_patches.patch_report import PatchReport, PatchState
from sglang_nvfp4_patches.server_args_seam import hooks
from sglang_nvfp4_patches.server_args_seam.seam import seam_module


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


def install(forced: bool, observe: bool) -> PatchReport:
    """Wire the rule in where its root cause is live (or it is forced); idempotent.
    ``observe``: wire nothing, say whether the root cause is live."""
    if observe:
        return unpatched_report()
    mode = mode_for(forced)
    set_mode(mode)
    if mode is Gemma4Mode.FIXED:
        return already_upstream()
    failure = hooks.ask(NAME)
    if failure is not None:
        return PatchReport(NAME, PatchState.FAILED, failure)
    if not hooks.wired():
        hooked = f"hooked when {seam_module()} is imported"
        return PatchReport(NAME, PatchState.PENDING, f"{_rule_summary(mode)}; {hooked}")
    return current_state()


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


def explain_note(moe_runner: str | None = None, moe_quantization: str | None = None) -> str:
    """One line for ``explain``'s Gemma 4 rows (the MoE runner does not matter to it)."""
    verdict = kv_scale_verdict()
    if current_mode() is Gemma4Mode.FORCED:
        return (
            "SGLANG_NVFP4_PATCHES_FORCE=gemma4-attention applies the triton rule (the "
            f"root-cause probe says {verdict.handoff.value} here)"
        )
    if not verdict.bug_live:
        return FIXED_NOTE
    return (
        f"{verdict_phrase(verdict)}; Gemma 4 NVFP4 MoE with an FP8 KV cache on SM10X gets "
        "triton unless a backend is given"
    )


def _verdict() -> str:
    """The release facts' verdict, never derived here (reading code cannot prove the fix)."""
    verdict = kv_scale_verdict()
    if verdict.evidence == NO_FACTS:
        raise NotApplicable(verdict_phrase(verdict))
    return verdict.evidence


def _default() -> str:
    verdict = kv_scale_verdict()
    expected = SAFE_BACKEND if verdict.bug_live else AFFECTED_BACKEND
    got = bundled_on_sm100()
    if got != expected:
        raise CheckFailed(
            f"SGLang resolves the bundled Gemma 4 NVFP4 MoE config (FP8 KV cache) on SM100 to "
            f"{got}, but the verdict is {verdict.handoff.value}, which calls for {expected}"
        )
    return f"SGLang resolves it on SM100 to {got}, as the verdict ({verdict.handoff.value}) asks"


def _explicit() -> str:
    got = bundled_on_sm100(AFFECTED_BACKEND)
    if got != AFFECTED_BACKEND:
        raise CheckFailed(
            f"--attention-backend {AFFECTED_BACKEND} resolves to {got}: the user's choice is "
            "overridden"
        )
    return f"--attention-backend {AFFECTED_BACKEND} stays {AFFECTED_BACKEND}"


def run_checks() -> list[CheckResult]:
    """Every check (call in a process where SGLang loaded the plugin)."""
    return [
        run_check(NAME, "root-cause verdict", _verdict),
        run_check(NAME, "Gemma 4 NVFP4 MoE, FP8 KV cache, SM100 default", _default),
        run_check(NAME, "explicit --attention-backend honoured", _explicit),
    ]
