"""What each part of ``llama4-router-weight`` did in this process (for ``doctor`` and logs);
a failure is one ERROR line that names the part and the release. Its suspension
(:mod:`sglang_nvfp4_patches.suspension`): inside :data:`suspended` every hook passes calls
through; the evidence suspends one half at a time (:data:`METHOD_LIFT`, :data:`RUNNER_PRESCALE`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from types import ModuleType

from sglang_nvfp4_patches.llama4_router_weight.rule import NAME, Part
from sglang_nvfp4_patches.patch_report import PatchReport, PatchState
from sglang_nvfp4_patches.release_gate import VERIFY_COMMAND, this_gate
from sglang_nvfp4_patches.supported_releases import sglang_version
from sglang_nvfp4_patches.suspension import Suspension

logger = logging.getLogger("sglang_nvfp4_patches.llama4_router_weight")

_lock = threading.Lock()
_outcomes: dict[Part, PatchReport] = {}

ModulePatcher = Callable[[ModuleType], None]

_whole = Suspension("llama4_router_weight_suspended")
suspended = _whole.suspended
METHOD_LIFT = Suspension("llama4_router_weight_method_lift_suspended")
RUNNER_PRESCALE = Suspension("llama4_router_weight_runner_prescale_suspended")


def is_suspended(half: Suspension) -> bool:
    """Whether ``half`` of the patch passes calls through (it, or the whole patch, suspended)."""
    return _whole.active() or half.active()


def record(part: Part, state: PatchState, reason: str) -> None:
    """Record ``part``'s outcome; a new failure or unknown logs one ERROR, a new live-but-
    unpatched finding one WARNING, a repeated outcome nothing."""
    report = PatchReport(NAME, state, reason)
    with _lock:
        if _outcomes.get(part) == report:
            return
        _outcomes[part] = report
    where = part.key
    if state is PatchState.NOT_PATCHED:
        because = this_gate().not_patched_because()
        logger.warning("[%s] live here: %s (%s); %s.", NAME, reason, where, because)
    if state is PatchState.UNKNOWN:
        run = f"Run `{VERIFY_COMMAND}` before serving Llama 4 on the CUTLASS runner."
        logger.error("[%s] %s (%s, SGLang %s). %s", NAME, reason, where, sglang_version(), run)
    if state is PatchState.FAILED:
        why = f"{reason}. SGLang is left unchanged there."
        logger.error("[%s] could not patch %s on SGLang %s: %s", NAME, where, sglang_version(), why)


def recorded() -> dict[Part, PatchReport]:
    with _lock:
        return dict(_outcomes)


def reported_as(part: Part, patch_module: ModulePatcher) -> ModulePatcher:
    """``patch_module``, any unexpected error of which is recorded as ``part``'s failure."""

    def guarded(module: ModuleType) -> None:
        try:
            patch_module(module)
        except Exception as error:
            record(part, PatchState.FAILED, f"{type(error).__name__}: {error}")

    guarded.__qualname__ = patch_module.__qualname__
    return guarded
