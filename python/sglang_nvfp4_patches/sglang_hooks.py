"""Install one hook through SGLang's ``HookRegistry`` without applying anyone else's.

``HookRegistry.apply_hooks()`` applies every target any plugin has registered and not yet
applied. Called from an import callback it would import other plugins' target modules halfway
through the import of the module being patched, and apply their hooks earlier than their
authors expect. :func:`install_hook` registers our hook and applies only its own target,
through the same registry (so SGLang's conflict checks, logging and ``from X import Y``
propagation still run) and marks that target applied, as ``apply_hooks`` would.
"""

from __future__ import annotations

import inspect
import pkgutil
from collections.abc import Callable
from typing import Any

from sglang_nvfp4_patches.status import PatchUnavailable

# Entry point and distribution names, as SGLang's loader would record them (see pyproject).
PLUGIN_ENTRY_POINT = "nvfp4_patches"
DISTRIBUTION = "sglang-nvfp4-patches"


def install_hook(target: str, hook: Callable[..., Any], kind: str = "around") -> Any:
    """Register ``hook`` on ``target`` (``HookType`` value: ``around``, ``before``, ``after``,
    ``replace``) and apply that target only. Returns the object now bound at ``target``.

    If another plugin already had ``target`` applied, only our hook is wrapped around what is
    there (``apply_hooks`` would skip the target and silently drop ours). Raises
    :class:`PatchUnavailable` when SGLang's registry lacks the per-target step or the target
    did not end up wrapped.
    """
    from sglang.srt.plugins import hook_registry

    registry = hook_registry.HookRegistry
    apply_target = getattr(registry, "_apply_target", None)
    hooks = getattr(registry, "_hooks", None)
    applied = getattr(registry, "_patched", None)
    if not callable(apply_target) or not isinstance(hooks, dict) or not isinstance(applied, set):
        raise PatchUnavailable(
            "SGLang's HookRegistry has no per-target apply step (_apply_target, _hooks, "
            "_patched); refusing to call apply_hooks(), which applies every plugin's targets"
        )
    hook_source = getattr(hook_registry, "HookSource", None)
    source = hook_source(PLUGIN_ENTRY_POINT, DISTRIBUTION) if hook_source else None
    registry.register(target, hook, hook_registry.HookType(kind), source=source)
    ours = hooks[target][-1]
    pending = [ours] if target in applied else list(hooks[target])
    try:
        apply_target(target, pending)
    except Exception:
        hooks[target].remove(ours)  # a later apply_hooks() must not retry it half-way
        raise
    applied.add(target)
    owner_path, attribute = target.rsplit(".", 1)
    installed = inspect.getattr_static(pkgutil.resolve_name(owner_path), attribute)
    function = getattr(installed, "__func__", installed)  # classmethod / staticmethod
    if getattr(function, "__wrapped__", None) is None:
        raise PatchUnavailable(f"SGLang's HookRegistry did not wrap {target}")
    return installed
