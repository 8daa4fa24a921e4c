"""Install ``gemma4-attention`` (the declaration's ``install``): where its root cause is fixed
(:func:`.rule_state.mode_for`) nothing; where it is live or forced, the rule's question
(:data:`.rule_state.QUESTION`) is asked through the server-args seam.
"""

from __future__ import annotations

from sglang_nvfp4_patches.gemma4_attention.read_back import (
    already_upstream,
    current_state,
    unpatched_report,
)
from sglang_nvfp4_patches.gemma4_attention.rule import Gemma4Mode
from sglang_nvfp4_patches.gemma4_attention.rule_state import QUESTION, mode_for, set_mode
from sglang_nvfp4_patches.server_args_seam import hooks
from sglang_nvfp4_patches.server_args_seam.seam import SeamKind, find_override_seam
from sglang_nvfp4_patches.status import PatchReport, PatchUnavailable

SM100_PROBE = "is_sm100_supported"  # SGLang's SM10X probe, read where the seam hands the record


def install(forced: bool, observe: bool) -> PatchReport:
    """Wire the rule in where its root cause is live (or it is forced); idempotent.
    ``observe``: wire nothing, say whether the root cause is live."""
    if observe:
        return unpatched_report()
    mode = mode_for(forced)
    set_mode(mode)
    if mode is Gemma4Mode.FIXED:
        return already_upstream()
    seam = find_override_seam()
    if seam.kind is not SeamKind.REGISTRY and not hasattr(seam.module, SM100_PROBE):
        raise PatchUnavailable(f"{seam.module.__name__} has no {SM100_PROBE}")
    hooks.ask(QUESTION, now=True)
    return current_state()
