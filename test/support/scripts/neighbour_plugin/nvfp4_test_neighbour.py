"""A second SGLang general plugin, installed beside ours in tests (its own distribution).

It registers one BEFORE hook through SGLang's ``HookRegistry`` on each target named in
``SGLANG_NVFP4_TEST_NEIGHBOUR_TARGETS`` (comma-separated), as any vendor or gateway plugin
would, and counts how often each hook runs.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

TARGETS_ENV = "SGLANG_NVFP4_TEST_NEIGHBOUR_TARGETS"
HOOKS: dict[str, Callable[..., None]] = {}
CALLS: dict[str, int] = {}


def _counting_hook(target: str) -> Callable[..., None]:
    def before(*_args: Any, **_kwargs: Any) -> None:
        CALLS[target] = CALLS.get(target, 0) + 1

    return before


def register() -> None:
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    for target in filter(None, os.environ.get(TARGETS_ENV, "").split(",")):
        HOOKS[target] = _counting_hook(target)
        HookRegistry.register(target, HOOKS[target], HookType.BEFORE)
