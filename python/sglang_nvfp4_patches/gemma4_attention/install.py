"""Install ``gemma4-attention`` (the declaration's ``install``): where its root cause is fixed
(:func:`.rule_state.mode_for`) nothing; where it is live or forced, the rule's question
(:func:`.rule_state.answer`) is asked through the server-args seam.
"""

from __future__ import annotations

from sglang_nvfp4_patches.gemma4_attention.read_back import (
    already_upstream,
    current_state,
    unpatched_report,
)
from sglang_nvfp4_patches.gemma4_attention.rule import NAME, Gemma4Mode
from sglang_nvfp4_patches.gemma4_attention.rule_state import mode_for, set_mode
from sglang_nvfp4_patches.patch_report import PatchReport, PatchState
from sglang_nvfp4_patches.server_args_seam import hooks
from sglang_nvfp4_patches.server_args_seam.seam import seam_module


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
        return PatchReport(NAME, PatchState.PENDING, f"hooked when {seam_module()} is imported")
    return current_state()
