"""Seam 1: the runner's fused functions in SGLang's fused-function registry (``FusedOpPool``).

Each CUTLASS entry is wrapped with the top-1 pre-scale (:mod:`.prescale`) and handed a config
without the flag, so the weight is applied once; :func:`.rule.decide` says where it is not.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any

from sglang_nvfp4_patches.llama4_router_weight import evidence, outcomes
from sglang_nvfp4_patches.llama4_router_weight.flag_free_view import (
    without_router_weight_on_input,
)
from sglang_nvfp4_patches.llama4_router_weight.refusals import (
    A2A_DISPATCH_TYPE_FIELD,
    FP4_ALLGATHER_FIELD,
    FP4_ALLGATHER_REMEDY,
    GENERIC_PREQUANTIZED_REMEDY,
    nvfp4_dispatch_remedy,
)
from sglang_nvfp4_patches.llama4_router_weight.rule import CUTLASS, Part, decide
from sglang_nvfp4_patches.patch_report import PatchState, PatchUnavailable
from sglang_nvfp4_patches.sglang_hooks import PATCHED_MARK

MOE_UTILS_MODULE = "sglang.srt.layers.moe.utils"
REGISTRY_MODULE = "sglang.srt.layers.moe.moe_runner.base"
STANDARD_DISPATCH, FLASHINFER_A2A = ("none", CUTLASS), ("flashinfer", CUTLASS)
CUTLASS_FUSED_FUNC_KEYS: tuple[tuple[str, str], ...] = (STANDARD_DISPATCH, FLASHINFER_A2A)

FusedFunc = Callable[[Any, Any, Any], Any]


def prequantized_remedies() -> dict[tuple[str, str], str]:
    """Per dispatch path, the switch that stops activations arriving quantized (looked up)."""
    from sglang.srt.server_args import ServerArgs

    remedies = dict.fromkeys(CUTLASS_FUSED_FUNC_KEYS, GENERIC_PREQUANTIZED_REMEDY)
    if hasattr(ServerArgs, FP4_ALLGATHER_FIELD):  # a dataclass or msgspec field, where it exists
        remedies[STANDARD_DISPATCH] = FP4_ALLGATHER_REMEDY
    remedies[FLASHINFER_A2A] = nvfp4_dispatch_remedy(has_dispatch_type_flag())
    return remedies


def has_dispatch_type_flag() -> bool:
    """Whether this release sets the all-to-all dispatch dtype with a server flag."""
    from sglang.srt.server_args import ServerArgs

    return hasattr(ServerArgs, A2A_DISPATCH_TYPE_FIELD)


def honour_router_weight_on_input(
    original: FusedFunc, prequantized_remedy: str = GENERIC_PREQUANTIZED_REMEDY
) -> FusedFunc:
    """Wrap one of SGLang's CUTLASS fused functions with the top-1 pre-scale."""
    from sglang_nvfp4_patches.llama4_router_weight.prescale import (  # torch: as SGLang's is
        as_float32_final_scales,
        prescale_router_weight_on_input,
    )

    def fused_func(dispatch_output: Any, quant_info: Any, runner_config: Any) -> Any:
        if outcomes.is_suspended(outcomes.RUNNER_PRESCALE):
            return original(dispatch_output, quant_info, runner_config)
        topk_output = dispatch_output.topk_output
        if runner_config.apply_router_weight_on_input:
            hidden_states, unit_scales = prescale_router_weight_on_input(
                dispatch_output.hidden_states,
                topk_output.topk_weights,
                getattr(dispatch_output, "hidden_states_scale", None),
                prequantized_remedy,
            )
            dispatch_output = dispatch_output._replace(
                hidden_states=hidden_states,
                topk_output=topk_output._replace(topk_weights=unit_scales),
            )
            runner_config = without_router_weight_on_input(runner_config)
        else:
            weights = as_float32_final_scales(topk_output.topk_weights)
            if weights is not topk_output.topk_weights:
                dispatch_output = dispatch_output._replace(
                    topk_output=topk_output._replace(topk_weights=weights)
                )
        return original(dispatch_output, quant_info, runner_config)

    functools.update_wrapper(fused_func, original, ("__name__", "__qualname__", "__doc__"), ())
    setattr(fused_func, PATCHED_MARK, True)
    return fused_func


def is_patched(obj: Any) -> bool:
    return bool(getattr(obj, PATCHED_MARK, False))


def fused_func_registry() -> dict[tuple[str, str], FusedFunc]:
    base = importlib.import_module(REGISTRY_MODULE)
    pool = getattr(base, "FusedOpPool", None)
    funcs = getattr(pool, "_fused_funcs", None)
    if not isinstance(funcs, dict):
        raise PatchUnavailable(f"{REGISTRY_MODULE}.FusedOpPool._fused_funcs is not a dict")
    return funcs


def require_flag_free_views() -> None:
    """Probe, before patching, that ``MoeRunnerConfig`` can be viewed flag-free (not slotted
    or frozen)."""
    config_cls = getattr(importlib.import_module(REGISTRY_MODULE), "MoeRunnerConfig", None)
    try:
        config = config_cls(apply_router_weight_on_input=True)  # type: ignore[misc]
        view = without_router_weight_on_input(config)
        config.top_k = 1
        works = not view.apply_router_weight_on_input and view.top_k == 1
    except Exception as error:
        raise PatchUnavailable(f"cannot view {REGISTRY_MODULE}.MoeRunnerConfig: {error}") from error
    if not works:
        raise PatchUnavailable(f"{REGISTRY_MODULE}.MoeRunnerConfig views do not share state")


def registry_prescaled() -> bool:
    """Whether our pre-scale wraps every CUTLASS entry of SGLang's fused-function registry."""
    try:
        registry = fused_func_registry()
    except PatchUnavailable:
        return False
    return all(is_patched(registry.get(key)) for key in CUTLASS_FUSED_FUNC_KEYS)


def runner_patcher(apply: bool = True) -> Callable[[ModuleType], None]:
    """Import callback: carry out :func:`.rule.decide` for the runner (``apply=False``: only
    record whether the bug is live)."""

    def patch_runner_module(_module: ModuleType) -> None:
        answer = decide(evidence.current_facts(), Part.RUNNER)
        if apply and answer.act:
            _wrap_registry(answer.reason)
        else:
            outcomes.record(Part.RUNNER, *answer.unpatched)

    return outcomes.reported_as(Part.RUNNER, patch_runner_module)


def _wrap_registry(reason: str) -> None:
    try:
        registry = fused_func_registry()
        missing = [key for key in CUTLASS_FUSED_FUNC_KEYS if key not in registry]
        if missing:
            raise PatchUnavailable(f"fused-function registry has no entry for {missing}")
        require_flag_free_views()
    except PatchUnavailable as error:
        outcomes.record(Part.RUNNER, PatchState.FAILED, str(error))
        return
    remedies = prequantized_remedies()
    for key in CUTLASS_FUSED_FUNC_KEYS:
        if not is_patched(registry[key]):
            registry[key] = honour_router_weight_on_input(registry[key], remedies[key])
    outcomes.record(Part.RUNNER, PatchState.APPLIED, reason)
