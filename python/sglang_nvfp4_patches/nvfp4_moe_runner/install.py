"""Install ``nvfp4-moe-runner`` (the declaration's ``install``): its question is asked through
the server-args seam as SGLang imports it, so plugin load imports nothing."""

from __future__ import annotations

import logging

from sglang_nvfp4_patches.nvfp4_moe_runner.read_back import unpatched_report
from sglang_nvfp4_patches.nvfp4_moe_runner.rule import NAME
from sglang_nvfp4_patches.patch_report import PatchReport, PatchState
from sglang_nvfp4_patches.server_args_seam import hooks
from sglang_nvfp4_patches.server_args_seam.seam import seam_module

logger = logging.getLogger("sglang_nvfp4_patches.nvfp4_moe_runner")


def install(forced: bool, observe: bool) -> PatchReport:
    """Ask the question when SGLang imports the seam; ``observe``: wire nothing, say whether
    the failure is live here. ``forced`` is never true: this patch cannot be forced."""
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
    failure = hooks.ask(NAME)
    if failure is not None:
        return PatchReport(NAME, PatchState.FAILED, failure)
    pending = "decided when SGLang resolves a ModelOpt NVFP4 MoE checkpoint"
    return PatchReport(
        NAME, PatchState.PENDING, f"{pending} (hooked when {seam_module()} is imported)"
    )
