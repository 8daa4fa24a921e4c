"""Seam 2: the NVFP4 MoE methods that reject the flag on their CUTLASS branch.

An AROUND hook on each method's ``create_moe_runner`` lets SGLang build the runner with the
real config, then carries out :func:`.rule.decide` for the layer: refuse it, naming the switch,
or hand the method a flag-free view for its own check while the ``MoeRunner`` keeps the real
config.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

from sglang_nvfp4_patches.llama4_router_weight import outcomes
from sglang_nvfp4_patches.llama4_router_weight.flag_free_view import (
    without_router_weight_on_input,
)
from sglang_nvfp4_patches.llama4_router_weight.layer_facts import layer_facts
from sglang_nvfp4_patches.llama4_router_weight.rule import (
    REJECTING_METHODS,
    Answer,
    RejectingMethod,
    decide,
)
from sglang_nvfp4_patches.llama4_router_weight.runner_registry import require_flag_free_views
from sglang_nvfp4_patches.llama4_router_weight.suspension import is_method_lift_suspended
from sglang_nvfp4_patches.patch_report import PatchState, PatchUnavailable
from sglang_nvfp4_patches.sglang_hooks import bound_at, hook_count, install_hook


def runs_on_cutlass(method: Any) -> bool:
    backend = getattr(getattr(method, "runner", None), "runner_backend", None)
    is_cutlass = getattr(backend, "is_flashinfer_cutlass", None)
    if callable(is_cutlass):
        return bool(is_cutlass())
    return bool(getattr(method, "enable_flashinfer_cutlass_moe", False))


def rejecting_method_of(method: Any) -> RejectingMethod:
    """The rejecting method whose ``create_moe_runner`` (hooked) ``method`` runs."""
    names = {cls.__name__ for cls in type(method).__mro__}
    return next(rejecting for rejecting in REJECTING_METHODS if rejecting.cls in names)


def create_moe_runner_hook(
    original: Callable[..., Any], method: Any, *args: Any, **kwargs: Any
) -> Any:
    """After SGLang builds the runner: refuse this layer, or lift the method's own check."""
    result = original(method, *args, **kwargs)
    if is_method_lift_suspended():
        return result
    config = getattr(method, "moe_runner_config", None)
    if config is not None and config.apply_router_weight_on_input and runs_on_cutlass(method):
        from sglang_nvfp4_patches.llama4_router_weight.evidence import current_facts

        layer = args[0] if args else kwargs.get("layer")
        part = rejecting_method_of(method).part
        answer = decide(current_facts(), part, layer_facts(layer, method, config))
        if answer.refusal is not None:
            raise answer.refusal
        if not answer.act:
            outcomes.record(part, answer.state, answer.reason)
            return result
        method.moe_runner_config = without_router_weight_on_input(config)
    return result


def answer_here(rejecting: RejectingMethod) -> Answer:
    """:func:`.rule.decide` for ``rejecting`` on the installed SGLang."""
    from sglang_nvfp4_patches.llama4_router_weight.evidence import current_facts

    return decide(current_facts(), rejecting.part)


def is_lifted(rejecting: RejectingMethod) -> bool:
    return hook_count(bound_at(rejecting.target), create_moe_runner_hook) == 1


def method_patcher(rejecting: RejectingMethod, apply: bool = True) -> Callable[[ModuleType], None]:
    """Import callback: hook ``rejecting``'s method where :func:`.rule.decide` lifts it
    (``apply=False``: only record whether the bug is live)."""

    def patch_module(module: ModuleType) -> None:
        method_cls = getattr(module, rejecting.cls, None)
        try:
            if method_cls is None or not hasattr(method_cls, "create_moe_runner"):
                raise PatchUnavailable(f"{rejecting.target} not found")
            answer = answer_here(rejecting)
            if answer.act:
                require_flag_free_views()
        except PatchUnavailable as error:
            outcomes.record(rejecting.part, PatchState.FAILED, str(error))
            return
        if not (apply and answer.act):
            outcomes.record(rejecting.part, *answer.unpatched)
            return
        install_hook(rejecting.target, create_moe_runner_hook)
        outcomes.record(rejecting.part, answer.state, answer.reason)

    patch_module.__qualname__ = f"patch_{rejecting.part.key.replace('-', '_')}_module"
    return outcomes.reported_as(rejecting.part)(patch_module)
