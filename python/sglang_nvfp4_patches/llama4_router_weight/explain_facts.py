"""What ``explain`` says on a Llama 4 row, and what it asks of the row's first MoE layer.

Server-args resolution leaves the MoE runner at ``auto`` for many Llama 4 NVFP4 checkpoints
(compressed-tensors ones always): the runner is picked when the quantization method builds
the layer. So :func:`layer_outcome` asks the method itself on the simulated GPU: it publishes
the resolved ``ServerArgs`` as this process's scheduler config (as a scheduler does), lets
SGLang's ModelOpt or compressed-tensors config pick the method for the checkpoint's first MoE
layer, and has it build its ``MoeRunner``, with whatever hooks this process has.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sglang_nvfp4_patches.llama4_router_weight import NAME
from sglang_nvfp4_patches.llama4_router_weight.method_lift import reading_of, rejecting_method_of
from sglang_nvfp4_patches.llama4_router_weight.refusals import RouterWeightOnInputError
from sglang_nvfp4_patches.llama4_router_weight.rule import LLAMA4_ARCHITECTURES
from sglang_nvfp4_patches.llama4_router_weight.runner_registry import (
    RUNNER_MODULE,
    no_prescale_of_its_own,
    upstream_prescale_problem,
)
from sglang_nvfp4_patches.simulation.gpus import GpuProfile, device_capability
from sglang_nvfp4_patches.simulation.moe_layer import (
    LLAMA4_MOE_PREFIX,
    LayerOutcome,
    fused_moe_layer,
    llama4_runner_config,
    published_scheduler_config,
)
from sglang_nvfp4_patches.simulation.server_args import quiet_sglang

CUTLASS_RUNNER = "flashinfer_cutlass"  # the MoE runner backend this patch acts on


def explain_note(moe_runner: str | None) -> str:
    """One line for ``explain``'s Llama 4 rows, given the MoE runner the row ends on."""
    if moe_runner == CUTLASS_RUNNER:
        return (
            f"{NAME}: the CUTLASS runner pre-scales the top-1 router weight "
            "(apply_router_weight_on_input)"
        )
    return f"{NAME} acts only on the {CUTLASS_RUNNER} MoE runner"


def _quant_method(quant_config: dict[str, Any], layer: Any) -> Any:
    """SGLang's own quantization method for the layer, from the checkpoint's config."""
    if quant_config.get("quant_method") == "compressed-tensors":
        from sglang.srt.layers.quantization.compressed_tensors.compressed_tensors import (
            CompressedTensorsConfig,
        )

        return CompressedTensorsConfig.from_config(quant_config).get_quant_method(
            layer, prefix=LLAMA4_MOE_PREFIX
        )
    from sglang.srt.layers.quantization.modelopt_quant import ModelOptFp4Config

    return ModelOptFp4Config.from_config(quant_config).get_quant_method(
        layer, prefix=LLAMA4_MOE_PREFIX
    )


def _nvfp4_quant_config(config: dict[str, Any]) -> dict[str, Any] | None:
    quant_config = config.get("quantization_config")
    if not isinstance(quant_config, dict):
        return None
    if quant_config.get("quant_method") == "compressed-tensors":
        return quant_config
    algo = quant_config.get("quant_algo") or (quant_config.get("quantization") or {}).get(
        "quant_algo"
    )
    return (
        quant_config if quant_config.get("quant_method") == "modelopt" and algo == "NVFP4" else None
    )


def _unpatched_failure(method: Any, runner: str | None) -> str | None:
    """Why SGLang as it ships fails at warm-up with the flag on ``runner`` (read by feature)."""
    if runner != CUTLASS_RUNNER:
        return None
    rejecting = rejecting_method_of(method)
    if rejecting is not None and (reading := reading_of(rejecting, type(method))).rejects:
        return (
            f"{rejecting.cls}.{rejecting.checked_in} rejects apply_router_weight_on_input "
            f"({reading.summary()})"
        )
    problem = upstream_prescale_problem(importlib.import_module(RUNNER_MODULE))
    return None if problem is None else no_prescale_of_its_own(problem)


def layer_outcome(
    model_dir: Path, gpu: GpuProfile, flags: Mapping[str, Any]
) -> LayerOutcome | None:
    """Build the checkpoint's first Llama 4 MoE layer as a scheduler would on ``gpu``,
    through SGLang's own NVFP4 method (ModelOpt or compressed-tensors) and whatever hooks this
    process has: the runner it builds, whether it is refused, and whether SGLang as it ships
    would fail at warm-up there (``None``: not an NVFP4 MoE checkpoint). No weights are
    created and no kernel runs."""
    config = json.loads((model_dir / "config.json").read_text())
    quant_config = _nvfp4_quant_config(config)
    if quant_config is None or not LLAMA4_ARCHITECTURES & set(config.get("architectures") or ()):
        return None
    text_config = config.get("text_config", config)
    experts = int(text_config.get("num_local_experts", 1))
    intermediate = int(text_config.get("intermediate_size", 1))
    with (
        quiet_sglang(),
        device_capability(gpu),
        published_scheduler_config(gpu, model_dir, **flags),
    ):
        layer = fused_moe_layer(experts, intermediate)
        refused = None
        try:
            method = _quant_method(quant_config, layer)
            layer.quant_method = method  # as FusedMoE sets it before building the runner
            runner_config = llama4_runner_config(
                experts,
                int(text_config.get("hidden_size", 1)),
                intermediate,
                top_k=int(text_config.get("num_experts_per_tok", 1)),
                layer=layer,
            )
            method.create_moe_runner(layer, runner_config)
        except RouterWeightOnInputError as ours:
            refused = str(ours)
        except (ValueError, RuntimeError, NotImplementedError) as sglangs:
            return LayerOutcome(f"refused: {sglangs}")
        except (AttributeError, KeyError, TypeError, ImportError):
            return None  # a release whose method builds layers otherwise: resolution only
        holder = getattr(layer, "scheme", None) or layer.quant_method
        backend = getattr(getattr(holder, "runner", None), "runner_backend", None)
        if backend is None:
            backend = getattr(holder, "_moe_runner_backend", None)
        runner = None if backend is None else str(getattr(backend, "value", backend))
        return LayerOutcome(runner, refused, _unpatched_failure(holder, runner))
