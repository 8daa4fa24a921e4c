"""Seam 1: the runner's fused functions in SGLang's fused-function registry (``FusedOpPool``).

Each CUTLASS entry is wrapped with the top-1 pre-scale (:mod:`.prescale`) and handed a config
without the flag, so the weight is applied once. The registry is left alone only where the
release facts show SGLang's own registered fused function, called by ``MoeRunner`` with the
flag, serving it (:mod:`.evidence`); a helper that works alone shows nothing.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

from sglang_nvfp4_patches.llama4_router_weight import outcomes
from sglang_nvfp4_patches.llama4_router_weight.flag_free_view import (
    without_router_weight_on_input,
)
from sglang_nvfp4_patches.llama4_router_weight.prescale import (
    as_float32_final_scales,
    prescale_router_weight_on_input,
)
from sglang_nvfp4_patches.llama4_router_weight.refusals import (
    A2A_DISPATCH_TYPE_FIELD,
    FP4_ALLGATHER_FIELD,
    FP4_ALLGATHER_REMEDY,
    GENERIC_PREQUANTIZED_REMEDY,
    nvfp4_dispatch_remedy,
)
from sglang_nvfp4_patches.llama4_router_weight.suspension import is_runner_prescale_suspended
from sglang_nvfp4_patches.release_gate import VERIFY_COMMAND
from sglang_nvfp4_patches.status import PATCHED_MARK, PatchState, PatchUnavailable

if TYPE_CHECKING:
    from sglang_nvfp4_patches.llama4_router_weight.rejection_question import Reading

RUNNER_MODULE = "sglang.srt.layers.moe.moe_runner.flashinfer_cutlass"
MOE_UTILS_MODULE = "sglang.srt.layers.moe.utils"
REGISTRY_MODULE = "sglang.srt.layers.moe.moe_runner.base"
STANDARD_DISPATCH, FLASHINFER_A2A = (
    ("none", "flashinfer_cutlass"),
    ("flashinfer", "flashinfer_cutlass"),
)
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

    def fused_func(dispatch_output: Any, quant_info: Any, runner_config: Any) -> Any:
        if is_runner_prescale_suspended():
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

    fused_func.__name__ = getattr(original, "__name__", "fused_func")
    fused_func.__qualname__ = getattr(original, "__qualname__", fused_func.__name__)
    fused_func.__doc__ = original.__doc__
    fused_func.__wrapped__ = original  # type: ignore[attr-defined]
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


DOUBLE_WEIGHTING = "vllm#43694's double weighting"


def runner_backends() -> tuple[str, ...]:
    """This release's MoE runner backend values (the reader decides tests that name one)."""
    backend_enum = getattr(importlib.import_module(MOE_UTILS_MODULE), "MoeRunnerBackend", ())
    return tuple(str(member.value) for member in backend_enum)


def upstream_prescale_problem() -> str | None:
    """Why SGLang's own runner is not shown to pre-scale top-1 (``None``: its row shows it)."""
    from sglang_nvfp4_patches.llama4_router_weight.evidence import RUNNER, UPSTREAM, current_facts

    fact = (current_facts() or {}).get(RUNNER)
    if isinstance(fact, dict):
        if fact.get("state") == UPSTREAM:
            return None
        return f"its registered fused function does not serve the flag ({fact.get('detail')})"
    return _fused_rejection() or (
        "no record shows its registered fused function pre-scaling top-1 on this SGLang "
        f"(`{VERIFY_COMMAND}` records it)"
    )


def runner_not_recorded() -> bool:
    """Whether no row and no fused function read to reject the flag shows what the runner does."""
    from sglang_nvfp4_patches.llama4_router_weight.evidence import current_row

    return current_row() is None and _fused_rejection() is None


@functools.cache
def _fused_reading(function: FusedFunc) -> Reading:
    from sglang_nvfp4_patches.llama4_router_weight.rejection_question import read_runner_function

    return read_runner_function(function, runner_backends())


def _fused_rejection() -> str | None:
    """Where one of SGLang's CUTLASS fused functions (under any wrapper of ours) is read to
    reject the flag."""
    try:
        registry = fused_func_registry()
    except PatchUnavailable as error:
        return str(error)
    for key in CUTLASS_FUSED_FUNC_KEYS:
        function = registry.get(key)
        if function is None:
            return f"the fused-function registry has no entry for {key}"
        reading = _fused_reading(getattr(function, "__wrapped__", function))
        if reading.rejected_at:
            name = getattr(function, "__name__", key)
            return f"its fused function {name} still rejects the flag ({reading.rejected_at[0]})"
    return None


def runner_problem() -> str | None:
    """Why this process's CUTLASS runner does not honour the flag, or ``None`` where it does."""
    if upstream_prescale_problem() is None:
        return None
    try:
        registry = fused_func_registry()
    except PatchUnavailable as error:
        return str(error)
    if all(is_patched(registry.get(key)) for key in CUTLASS_FUSED_FUNC_KEYS):
        return None
    return "its CUTLASS fused functions still reject apply_router_weight_on_input"


def runner_patcher(apply: bool = True) -> Callable[[ModuleType], None]:
    """Import callback: wrap the registry's entries unless upstream pre-scales (``apply=False``:
    only record whether the rejection is live)."""

    @outcomes.reported_as("runner")
    def patch_runner_module(_module: ModuleType) -> None:
        problem = upstream_prescale_problem()
        if problem is None:
            from sglang_nvfp4_patches.llama4_router_weight.evidence import current_row, shown_by

            shown = shown_by(current_row())
            why = f"{RUNNER_MODULE}'s registered fused function pre-scales top-1 itself ({shown})"
            outcomes.record("runner", PatchState.ALREADY_UPSTREAM, why)
        elif apply:
            _wrap_registry(problem)
        elif runner_not_recorded():
            outcomes.record("runner", PatchState.UNKNOWN, runner_cannot_tell(problem))
        else:
            outcomes.record("runner", PatchState.NOT_PATCHED, no_prescale_of_its_own(problem))

    return patch_runner_module


def runner_cannot_tell(problem: str) -> str:
    return f"cannot tell whether the CUTLASS runner applies the router weight by itself ({problem})"


def no_prescale_of_its_own(problem: str) -> str:
    return f"the CUTLASS runner has no working top-1 pre-scale of its own ({problem})"


def _wrap_registry(problem: str) -> None:
    try:
        registry = fused_func_registry()
        missing = [key for key in CUTLASS_FUSED_FUNC_KEYS if key not in registry]
        if missing:
            raise PatchUnavailable(f"fused-function registry has no entry for {missing}")
        require_flag_free_views()
    except PatchUnavailable as error:
        outcomes.record("runner", PatchState.FAILED, str(error))
        return
    remedies = prequantized_remedies()
    for key in CUTLASS_FUSED_FUNC_KEYS:
        if not is_patched(registry[key]):
            registry[key] = honour_router_weight_on_input(registry[key], remedies[key])
    outcomes.record(
        "runner",
        PatchState.APPLIED,
        "FlashInfer CUTLASS fused functions pre-scale top-1 router weights on the input "
        f"({problem})",
    )
