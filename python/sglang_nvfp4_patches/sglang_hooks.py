"""Install an AROUND hook through SGLang's ``HookRegistry`` for our own target only.

``HookRegistry.apply_hooks()`` applies every target any plugin registered. Called from an
import callback, it would import other plugins' targets halfway through an SGLang import,
so only the target we just registered is applied here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def hook_around(target: str, hook: Callable[..., Any]) -> None:
    """Register ``hook`` AROUND ``target`` ("module.Class.method") and apply that target."""
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    HookRegistry.register(target, hook, HookType.AROUND)
    if target in HookRegistry._patched:
        raise RuntimeError(f"{target} was already hooked before this plugin registered")
    HookRegistry._apply_target(target, HookRegistry._hooks[target])
    HookRegistry._patched.add(target)
