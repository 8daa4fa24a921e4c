"""Seam 2: the NVFP4 MoE methods that reject the flag on their CUTLASS branch.

An AROUND hook on each method's ``create_moe_runner`` lets SGLang build the runner with the
real config, then carries out :func:`.rule.decide` for the layer: refuse it, naming the switch,
or hand the method a flag-free view for its own check while the ``MoeRunner`` keeps the real
config. What SGLang has fixed about the layer by then (:func:`layer_facts`) is probed by
feature: the method's holder, the experts per token, and whether the FP4 all-gather or the
all-to-all's NVFP4 dispatch quantizes activations before the runner.
"""

from __future__ import annotations

import functools
import importlib
import logging
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

from sglang_nvfp4_patches.llama4_router_weight import evidence, outcomes
from sglang_nvfp4_patches.llama4_router_weight.flag_free_view import (
    without_router_weight_on_input,
)
from sglang_nvfp4_patches.llama4_router_weight.rule import (
    REJECTING_METHODS,
    Answer,
    LayerFacts,
    RejectingMethod,
    decide,
)
from sglang_nvfp4_patches.llama4_router_weight.runner_registry import (
    MOE_UTILS_MODULE,
    has_dispatch_type_flag,
    registry_prescaled,
    require_flag_free_views,
)
from sglang_nvfp4_patches.patch_report import PatchState, PatchUnavailable
from sglang_nvfp4_patches.sglang_hooks import bound_at, hook_count, install_hook

logger = logging.getLogger("sglang_nvfp4_patches.llama4_router_weight")

COMPRESSED_TENSORS_CONFIG_MODULE = (
    "sglang.srt.layers.quantization.compressed_tensors.compressed_tensors"
)


@functools.lru_cache(maxsize=4)
def _model_config_for(model_path: str, revision: str | None) -> Any:
    """The scheduler's model config, built once per model (the arguments are the cache key)."""
    from sglang.srt.configs.model_config import ModelConfig
    from sglang.srt.server_args import get_global_server_args

    return ModelConfig.from_server_args(get_global_server_args())


def _process_model_config() -> Any:
    try:  # where SGLang has it: the process's ModelConfig, built once from the published config
        from sglang.srt.runtime_context import process_model_config
    except ImportError:
        from sglang.srt.server_args import get_global_server_args

        server_args = get_global_server_args()
        return _model_config_for(server_args.model_path, getattr(server_args, "revision", None))
    return process_model_config()


def experts_per_token(runner_config: Any) -> int | None:
    """The layer's top-k: its own, else the model's ``num_experts_per_tok`` (``None``: unknown;
    the runner's forward-time check still stands)."""
    top_k = getattr(runner_config, "top_k", None)
    if top_k is not None:
        return int(top_k)
    try:
        model_config = _process_model_config()
        text_config = getattr(model_config, "hf_text_config", None) or model_config.hf_config
        value = getattr(text_config, "num_experts_per_tok", None)
    except Exception as error:  # no published config (a bare layer): leave it to forward
        logger.debug("experts per token unknown at layer build: %s", error)
        return None
    return None if value is None else int(value)


def fp4_allgather() -> bool:
    moe_utils = importlib.import_module(MOE_UTILS_MODULE)
    should_use = getattr(moe_utils, "should_use_flashinfer_cutlass_moe_fp4_allgather", None)
    return bool(should_use()) if callable(should_use) else False


def nvfp4_dispatch(method: Any) -> bool:
    """Whether the FlashInfer all-to-all hands this method NVFP4 activations, as its module
    decides it (``_use_nvfp4_dispatch``, or ``MOE_NVFP4_DISPATCH`` on older releases)."""
    a2a_backend = getattr(importlib.import_module(MOE_UTILS_MODULE), "get_moe_a2a_backend", None)
    if not callable(a2a_backend) or not a2a_backend().is_flashinfer():
        return False
    if getattr(getattr(method, "quant_config", None), "use_per_token_activation", False):
        return False
    module = sys.modules.get(type(method).__module__)
    uses_nvfp4 = getattr(module, "_use_nvfp4_dispatch", None)
    if callable(uses_nvfp4):
        return bool(uses_nvfp4())
    return bool(getattr(module, "MOE_NVFP4_DISPATCH", False))


def wrapper_of(layer: Any, method: Any) -> str | None:
    """The class name of whatever stands between ``layer`` and ``method`` (``None``: the
    layer's own quant method, or the scheme of its own compressed-tensors method)."""
    holder = getattr(layer, "quant_method", None)
    if holder is method:
        return None
    module = sys.modules.get(COMPRESSED_TENSORS_CONFIG_MODULE)
    ct_method = getattr(module, "CompressedTensorsFusedMoEMethod", None)
    if (
        ct_method is not None
        and type(holder) is ct_method
        and getattr(layer, "scheme", None) is method
    ):
        return None
    return type(holder).__name__ if holder is not None else "an unknown holder (no quant_method)"


def layer_facts(layer: Any, method: Any, runner_config: Any) -> LayerFacts:
    return LayerFacts(
        method=type(method).__name__,
        wrapper=wrapper_of(layer, method),
        top_k=experts_per_token(runner_config),
        fp4_allgather=fp4_allgather(),
        nvfp4_dispatch=nvfp4_dispatch(method),
        dispatch_type_flag=has_dispatch_type_flag(),
        runner_prescaled=registry_prescaled(),
    )


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
    if outcomes.is_suspended(outcomes.METHOD_LIFT):
        return result
    config = getattr(method, "moe_runner_config", None)
    if config is not None and config.apply_router_weight_on_input and runs_on_cutlass(method):
        layer = args[0] if args else kwargs.get("layer")
        part = rejecting_method_of(method).part
        answer = decide(evidence.current_facts(), part, layer_facts(layer, method, config))
        if answer.refusal is not None:
            raise answer.refusal
        if answer.act:
            method.moe_runner_config = without_router_weight_on_input(config)
        else:
            outcomes.record(part, answer.state, answer.reason)
    return result


def answer_here(rejecting: RejectingMethod) -> Answer:
    """:func:`.rule.decide` for ``rejecting`` on the installed SGLang."""
    return decide(evidence.current_facts(), rejecting.part)


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
    return outcomes.reported_as(rejecting.part, patch_module)
