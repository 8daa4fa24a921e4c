"""SGLang's own registry of fused MoE functions, asked at run time: which MoE runner a layer
can build with which all-to-all backend (``@register_fused_func(a2a, runner)``)."""

from __future__ import annotations

import functools
import importlib
import logging
from typing import Any

from sglang_nvfp4_patches.post_import import module_exists

RUNNER_PACKAGE = "sglang.srt.layers.moe.moe_runner"
logger = logging.getLogger(__name__)


@functools.cache
def _pool() -> Any:
    """SGLang's ``FusedOpPool`` with every runner module's functions registered (``None``:
    this release has no such registry); the runner modules are imported once."""
    try:
        from sglang.srt.layers.moe.moe_runner.base import FusedOpPool
        from sglang.srt.layers.moe.utils import MoeRunnerBackend
    except ImportError:
        return None
    if not hasattr(FusedOpPool, "get_fused_func"):
        return None
    for backend in MoeRunnerBackend:  # a runner's module registers its functions on import
        module = f"{RUNNER_PACKAGE}.{backend.value}"
        if module_exists(module):
            try:
                importlib.import_module(module)
            except Exception as error:  # a module this machine cannot import registers nothing
                logger.debug("cannot import %s: %s", module, error)
    return FusedOpPool


def registered(a2a: str, runner: str) -> bool | None:
    """Whether SGLang holds a fused function for ``runner`` behind ``a2a`` (``None``: no
    registry to ask)."""
    pool = _pool()
    return None if pool is None else pool.get_fused_func(a2a, runner) is not None


def runners_for(a2a: str) -> tuple[str, ...] | None:
    """The runners SGLang holds a fused function for behind ``a2a``."""
    pool = _pool()
    if pool is None:
        return None
    from sglang.srt.layers.moe.utils import MoeRunnerBackend

    return tuple(b.value for b in MoeRunnerBackend if pool.get_fused_func(a2a, b.value))
