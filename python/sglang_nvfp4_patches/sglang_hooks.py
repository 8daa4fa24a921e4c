"""Wrap one SGLang target with our hook, beside any other plugin's hooks on it: through the
``HookRegistry``'s own per-target step, recording nothing (our hooks go on as their module is
imported, before, during or after ``apply_hooks()``; a recorded one would be lost or applied
twice), so every hook is in the chain exactly once, in any load order.
"""

from __future__ import annotations

import inspect
import pkgutil
from collections.abc import Callable
from typing import Any

from sglang_nvfp4_patches.patch_report import PatchUnavailable

# Entry point and distribution names, as SGLang's loader would record them (see pyproject).
PLUGIN_ENTRY_POINT = "nvfp4_patches"
DISTRIBUTION = "sglang-nvfp4-patches"
# Set on every function this plugin installs, so a probe can tell ours from SGLang's own.
PATCHED_MARK = "__sglang_nvfp4_patches__"


def bound_at(target: str) -> Any:
    """What is bound at ``target`` now, without triggering descriptors."""
    owner_path, attribute = target.rsplit(".", 1)
    return inspect.getattr_static(pkgutil.resolve_name(owner_path), attribute)


def hook_count(bound: Any, hook: Callable[..., Any]) -> int:
    """How many functions in ``bound``'s chain (``__wrapped__``, outermost first) hold ``hook``
    in a closure cell."""
    function = getattr(bound, "__func__", bound)  # classmethod / staticmethod
    count, seen = 0, set()
    while function is not None and id(function) not in seen:
        seen.add(id(function))
        cells = function.__closure__ or ()
        count += any(getattr(cell, "cell_contents", None) is hook for cell in cells)
        function = getattr(function, "__wrapped__", None)
    return count


def install_hook(target: str, hook: Callable[..., Any]) -> None:
    """Wrap ``hook`` AROUND what is bound at ``target``, once. :class:`PatchUnavailable` where
    SGLang's registry lacks the per-target step or did not wrap it (the target is then as it
    was)."""
    from sglang.srt.plugins import hook_registry

    if hook_count(bound_at(target), hook):
        return
    apply_target = getattr(hook_registry.HookRegistry, "_apply_target", None)
    if not callable(apply_target):
        raise PatchUnavailable(
            "SGLang's HookRegistry has no per-target apply step (_apply_target); refusing to "
            "call apply_hooks(), which applies every plugin's targets"
        )
    hook_source = getattr(hook_registry, "HookSource", None)
    source = hook_source(PLUGIN_ENTRY_POINT, DISTRIBUTION) if hook_source else None
    apply_target(target, [(hook_registry.HookType("around"), hook, source)])
    if hook_count(bound_at(target), hook) != 1:
        raise PatchUnavailable(f"SGLang's HookRegistry did not wrap {target} with around hook")
