"""Seam 1: the runner's fused functions in SGLang's fused-function registry.

``sglang/srt/layers/moe/moe_runner/flashinfer_cutlass.py`` registers one fused function per
dispatch path in ``FusedOpPool``; before 0.5.21 both assert the flag away. Each registry
entry is wrapped with the top-1 pre-scale (:mod:`.prescale`), so the runner is
the one place the router weight is applied. From 0.5.21 the runner pre-scales itself
(``_prescale_router_weight_on_input``) and the registry is left alone, but only where that
pre-scale does its job: it is called once on CPU with a two-token top-1 batch and must hand
back ``x * w`` with float32 unit final scales (:func:`upstream_prescale_problem`). Where it is
missing, renamed or wrong, ours wraps the registry; it hands SGLang's fused function a config
without the flag, so a pre-scale of SGLang's own under any name does not apply the weight
again.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any

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
from sglang_nvfp4_patches.llama4_router_weight.rejection_reader import (
    Reading,
    Verdict,
    read_runner_function,
)
from sglang_nvfp4_patches.llama4_router_weight.suspension import is_suspended
from sglang_nvfp4_patches.status import PATCHED_MARK, PatchState, PatchUnavailable

RUNNER_MODULE = "sglang.srt.layers.moe.moe_runner.flashinfer_cutlass"
MOE_UTILS_MODULE = "sglang.srt.layers.moe.utils"
REGISTRY_MODULE = "sglang.srt.layers.moe.moe_runner.base"
STANDARD_DISPATCH, FLASHINFER_A2A = (
    ("none", "flashinfer_cutlass"),
    ("flashinfer", "flashinfer_cutlass"),
)
CUTLASS_FUSED_FUNC_KEYS: tuple[tuple[str, str], ...] = (STANDARD_DISPATCH, FLASHINFER_A2A)
UPSTREAM_PRESCALE = "_prescale_router_weight_on_input"

FusedFunc = Callable[[Any, Any, Any], Any]


def prequantized_remedies() -> dict[tuple[str, str], str]:
    """Per dispatch path, the switch that stops activations arriving quantized, where this
    release has it (the field / variable is looked up, not assumed)."""
    from sglang.srt.server_args import ServerArgs

    remedies = dict.fromkeys(CUTLASS_FUSED_FUNC_KEYS, GENERIC_PREQUANTIZED_REMEDY)
    if hasattr(ServerArgs, FP4_ALLGATHER_FIELD):  # a dataclass or msgspec field (0.5.20+)
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
        if is_suspended():
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
    """Probe, before patching, that this release's ``MoeRunnerConfig`` can be viewed so (a
    slotted or frozen config could not): a failure here leaves SGLang untouched."""
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


STILL_REJECTS = "CUTLASS fused functions still reject apply_router_weight_on_input"
DOUBLE_WEIGHTING = "vllm#43694's double weighting"


def runner_backends() -> tuple[str, ...]:
    """This release's MoE runner backend values (the reader decides tests that name one)."""
    backend_enum = getattr(importlib.import_module(MOE_UTILS_MODULE), "MoeRunnerBackend", ())
    return tuple(str(member.value) for member in backend_enum)


def upstream_prescale_problem(module: ModuleType) -> str | None:
    """Why the runner's own top-1 pre-scale cannot be relied on here (``None``: it can): it
    is missing or wrong, or a fused function of SGLang's still rejects the flag (or cannot
    be read)."""
    helper = getattr(module, UPSTREAM_PRESCALE, None)
    if not callable(helper):
        return _fused_function_problem() or f"{RUNNER_MODULE} has no {UPSTREAM_PRESCALE}"
    return _prescale_misbehaviour(helper) or _fused_function_problem()


@functools.cache
def _fused_reading(function: FusedFunc) -> Reading:
    return read_runner_function(function, runner_backends())


def _fused_function_problem() -> str | None:
    """Where one of SGLang's CUTLASS fused functions (the originals, under any wrapper of
    ours) still rejects the flag, or cannot be read."""
    try:
        registry = fused_func_registry()
    except PatchUnavailable as error:
        return str(error)
    for key in CUTLASS_FUSED_FUNC_KEYS:
        function = registry.get(key)
        if function is None:
            return f"the fused-function registry has no entry for {key}"
        reading = _fused_reading(function)
        name = getattr(function, "__name__", key)
        if reading.rejected_at:
            return f"its fused function {name} still rejects the flag ({reading.rejected_at[0]})"
        if reading.verdict is Verdict.UNKNOWN:
            return (
                f"cannot tell whether its fused function {name} rejects the flag: "
                f"{reading.summary()}"
            )
    return None


@functools.cache
def _prescale_misbehaviour(helper: Callable[[Any, Any], Any]) -> str | None:
    """Call SGLang's pre-scale once on CPU (two tokens, top-1, the flag set): what it gets
    wrong, or ``None``."""
    import torch
    from sglang.srt.layers.moe.token_dispatcher.standard import StandardDispatchOutput
    from sglang.srt.layers.moe.topk import StandardTopKOutput

    cpu = torch.device("cpu")
    x = torch.tensor([[1.0, -2.0], [3.0, 0.5]], dtype=torch.bfloat16, device=cpu)
    weights = torch.tensor([[0.5], [0.25]], dtype=torch.float32, device=cpu)
    ids = torch.tensor([[0], [1]], dtype=torch.int32, device=cpu)
    name = UPSTREAM_PRESCALE
    try:
        config_cls = importlib.import_module(REGISTRY_MODULE).MoeRunnerConfig
        topk = StandardTopKOutput(topk_weights=weights, topk_ids=ids, router_logits=None)
        dispatch = StandardDispatchOutput(
            hidden_states=x, hidden_states_scale=None, topk_output=topk
        )
        out = helper(dispatch, config_cls(apply_router_weight_on_input=True, top_k=1))
        hidden, scales = out.hidden_states, out.topk_output.topk_weights
    except Exception as error:
        return f"{name} fails on a top-1 batch on CPU ({type(error).__name__}: {error})"
    if not torch.equal(hidden, x * weights.to(x.dtype)):
        return f"{name} does not hand back the hidden states times the router weight"
    if scales.dtype != torch.float32 or not torch.all(scales == 1):
        return f"{name} hands the kernel the router weights again ({DOUBLE_WEIGHTING})"
    return None


def runner_problem() -> str | None:
    """Why this process's CUTLASS runner does not honour the flag (it neither pre-scales by
    itself nor carries our pre-scale), or ``None`` where it does."""
    module = importlib.import_module(RUNNER_MODULE)
    if upstream_prescale_problem(module) is None:
        return None
    try:
        registry = fused_func_registry()
    except PatchUnavailable as error:
        return str(error)
    if all(is_patched(registry.get(key)) for key in CUTLASS_FUSED_FUNC_KEYS):
        return None
    return f"its {STILL_REJECTS}"


def runner_patcher(apply: bool = True) -> Callable[[ModuleType], None]:
    """Import callback for the runner module: wrap its registry entries unless upstream
    pre-scales already; with ``apply=False`` only record whether the rejection is live."""

    @outcomes.reported_as("runner")
    def patch_runner_module(module: ModuleType) -> None:
        problem = upstream_prescale_problem(module)
        if problem is None:
            outcomes.record(
                "runner",
                PatchState.ALREADY_UPSTREAM,
                f"{RUNNER_MODULE}.{UPSTREAM_PRESCALE} pre-scales top-1 itself (checked on CPU)",
            )
        elif apply:
            _wrap_registry(problem)
        else:
            outcomes.record("runner", PatchState.NOT_PATCHED, no_prescale_of_its_own(problem))

    return patch_runner_module


def no_prescale_of_its_own(problem: str) -> str:
    """What is live where the runner has no working pre-scale of its own."""
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
