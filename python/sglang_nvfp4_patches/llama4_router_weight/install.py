"""Install ``llama4-router-weight`` (the declaration's ``install``): each part is probed and
patched when SGLang imports its module (:func:`sglang_nvfp4_patches.post_import.when_imported`):
the runner's fused functions (:func:`.runner_registry.runner_patcher`) and each rejecting
method (:func:`.method_lift.method_patcher`); ``--use-ray`` in :mod:`.ray_job_check`.
"""

from __future__ import annotations

from sglang_nvfp4_patches.llama4_router_weight import outcomes
from sglang_nvfp4_patches.llama4_router_weight.method_lift import method_patcher
from sglang_nvfp4_patches.llama4_router_weight.rule import NAME, REJECTING_METHODS, RUNNER_MODULE
from sglang_nvfp4_patches.llama4_router_weight.runner_registry import runner_patcher
from sglang_nvfp4_patches.patch_report import PatchReport, PatchState
from sglang_nvfp4_patches.post_import import module_exists
from sglang_nvfp4_patches.release_gate import VERIFY_COMMAND


def not_applicable() -> PatchReport:
    return PatchReport(
        NAME,
        PatchState.NOT_APPLICABLE,
        f"this SGLang has no FlashInfer CUTLASS MoE runner module ({RUNNER_MODULE})",
    )


def install(forced: bool, observe: bool) -> PatchReport:
    """Arrange for every part to be patched (``observe``: only probed) when SGLang imports its
    module. ``forced`` is never true: this patch cannot be forced."""
    from sglang_nvfp4_patches.llama4_router_weight import ray_job_check
    from sglang_nvfp4_patches.post_import import when_imported

    if not module_exists(RUNNER_MODULE):
        return not_applicable()
    when_imported(RUNNER_MODULE, runner_patcher(apply=not observe))
    for rejecting in REJECTING_METHODS:
        when_imported(rejecting.module, method_patcher(rejecting, apply=not observe))
    if not observe:
        ray_job_check.install()
    return summarize(observe)


def summarize(observe: bool) -> PatchReport:
    """One report from the parts, ranked as :func:`.read_back.unpatched_report` ranks them (a
    process that imported SGLang before the plugin reports what one that imports it after does)."""
    parts = outcomes.recorded()
    states = {report.state for report in parts.values()}
    every = len(parts) == 1 + len(REJECTING_METHODS)
    failed = [
        f"{part.key}: {r.reason}" for part, r in parts.items() if r.state is PatchState.FAILED
    ]
    if failed:
        return PatchReport(NAME, PatchState.FAILED, "; ".join(failed))
    reason = "; ".join(report.reason for report in parts.values())
    if PatchState.NOT_PATCHED in states:
        return PatchReport(NAME, PatchState.NOT_PATCHED, reason)
    # unknown only once every part has answered: a part still to come may show its bug live
    if not parts or (PatchState.UNKNOWN in states and not every):
        action = "probed" if observe else "patched"
        return PatchReport(NAME, PatchState.PENDING, f"{action} when SGLang loads a MoE layer")
    if PatchState.UNKNOWN in states:
        reason = "; ".join(r.reason for r in parts.values() if r.state is PatchState.UNKNOWN)
        return PatchReport(NAME, PatchState.UNKNOWN, f"{reason}; run `{VERIFY_COMMAND}`")
    if states == {PatchState.ALREADY_UPSTREAM} and every:
        return PatchReport(NAME, PatchState.ALREADY_UPSTREAM, reason)
    return PatchReport(NAME, PatchState.APPLIED, reason)
