"""Install ``nvfp4-moe-runner`` (the declaration's ``install``): its hook goes on the seam this
SGLang has (:mod:`..override_seam`), and decides per launch (:mod:`.decision`) from the
evidence record, which is read only when a launch needs it: never at plugin load."""

from __future__ import annotations

from sglang_nvfp4_patches.nvfp4_moe_runner import NAME, seam_hooks
from sglang_nvfp4_patches.nvfp4_moe_runner.read_back import unpatched_report
from sglang_nvfp4_patches.override_seam import find_override_seam
from sglang_nvfp4_patches.status import PatchReport, PatchState

PENDING = "decided when SGLang resolves a Llama 4 or Gemma 4 ModelOpt NVFP4 MoE checkpoint"


def install(forced: bool, observe: bool) -> PatchReport:
    """Put the hook on this SGLang's seam (idempotent); ``observe``: wire nothing, say from
    the evidence whether the failure is live here. ``forced`` is never true: this patch
    cannot be forced (its declaration says why)."""
    seam = find_override_seam()
    if observe:
        return unpatched_report()
    seam_hooks.install(seam)
    return PatchReport(NAME, PatchState.PENDING, f"{seam.name}: {PENDING}")
