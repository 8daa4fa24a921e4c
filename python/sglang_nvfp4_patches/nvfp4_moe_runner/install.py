"""Install ``nvfp4-moe-runner`` (the declaration's ``install``): its hook goes on the seam this
SGLang has (:mod:`..override_seam`) as soon as SGLang imports it, so plugin load imports
nothing; the hook decides per launch (:mod:`.decision`) from the evidence record, which is
read only when a launch needs it."""

from __future__ import annotations

import logging
from types import ModuleType

from sglang_nvfp4_patches.nvfp4_moe_runner import NAME, seam_hooks
from sglang_nvfp4_patches.nvfp4_moe_runner.read_back import unpatched_report
from sglang_nvfp4_patches.override_seam import find_override_seam, seam_module
from sglang_nvfp4_patches.post_import import when_imported
from sglang_nvfp4_patches.status import PatchReport, PatchState, PatchUnavailable, sglang_version

logger = logging.getLogger("sglang_nvfp4_patches.nvfp4_moe_runner")
PENDING = "decided when SGLang resolves a ModelOpt NVFP4 MoE checkpoint"
_failures: list[str] = []


def wire(_module: ModuleType | None = None) -> None:
    """Import callback: put the hook on the seam (idempotent); where this SGLang has no usable
    seam, one ERROR and SGLang left as it is."""
    try:
        seam_hooks.install(find_override_seam())
    except PatchUnavailable as error:
        _failures.append(str(error))
        logger.error(
            "[%s] could not be applied on SGLang %s: %s. SGLang is left unchanged for this patch.",
            NAME,
            sglang_version(),
            error,
        )


def install(forced: bool, observe: bool) -> PatchReport:
    """Arrange for the hook to go on the seam when SGLang imports it; ``observe``: wire
    nothing, say from the evidence whether the failure is live here. ``forced`` is never
    true: this patch cannot be forced (its declaration says why)."""
    if observe:
        report = unpatched_report()
        if report.state is PatchState.UNKNOWN:  # nothing wired, nothing known: say what to do
            logger.warning(
                "[%s] %s. A ModelOpt NVFP4 MoE checkpoint launched here with the MoE runner "
                "left at auto may fail at its first forward (the layer building the "
                "flashinfer_trtllm runner on weights prepared for CUTLASS: 'g1_scale_c'); "
                "--moe-runner-backend flashinfer_cutlass avoids it.",
                NAME,
                report.reason,
            )
        return report
    module = seam_module()
    when_imported(module, wire)
    if _failures:
        return PatchReport(NAME, PatchState.FAILED, _failures[-1])
    return PatchReport(NAME, PatchState.PENDING, f"{PENDING} (hooked when {module} is imported)")
