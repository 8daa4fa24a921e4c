"""A MoE layer built the way a scheduler builds it, on CPU: the published config, SGLang's
``FusedMoE`` placement and ``MoeRunnerConfig``, and the runner a compressed-tensors scheme picks.

Server-args resolution leaves the MoE runner at ``auto`` for compressed-tensors checkpoints:
the runner is picked when the quantization scheme builds the layer. So ``explain`` asks the
scheme itself on the simulated GPU: it publishes the resolved ``ServerArgs`` as this
process's scheduler config (as a scheduler does), lets SGLang's ``CompressedTensorsConfig``
pick the scheme for the checkpoint's first MoE layer, and has it build its ``MoeRunner``.
No weights are created and no kernel runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import inspect
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sglang_nvfp4_patches.simulation.gpus import GpuProfile, device_capability, simulated_gpu
from sglang_nvfp4_patches.simulation.server_args import quiet_sglang, resolved_server_args

# Llama 4's first MoE layer, as SGLang names it when it loads the checkpoint.
LLAMA4_MOE_PREFIX = "language_model.model.layers.0.feed_forward.experts"


def publish_for_scheduler(server_args: Any) -> None:
    """Install ``server_args`` as this process's scheduler config, as the scheduler does."""
    try:
        from sglang.srt.runtime_context import publish
    except ImportError:  # before 0.5.20
        from sglang.srt.server_args import set_global_server_args_for_scheduler

        set_global_server_args_for_scheduler(server_args)
        return
    publish(server_args, role="scheduler")


@contextlib.contextmanager
def published_scheduler_config(profile: GpuProfile, model_dir: Path, **flags: Any) -> Iterator[Any]:
    """What a scheduler does first, on ``profile``'s simulated GPU: resolve the ServerArgs for
    ``model_dir`` (``flags`` as a user gives them), publish it, seed the MoE settings."""
    with simulated_gpu(profile):
        server_args = resolved_server_args(model_dir, **flags)
        publish_for_scheduler(server_args)
        initialize_moe_config(server_args)
        yield server_args


def initialize_moe_config(server_args: Any) -> None:
    """What the scheduler does after publishing: seed the MoE runtime flags."""
    from sglang.srt.layers.moe.utils import initialize_moe_config as initialize

    if inspect.signature(initialize).parameters:
        initialize(server_args)
    else:
        initialize()


def runner_config_kwargs(**kwargs: Any) -> dict[str, Any]:
    """``MoeRunnerConfig`` keyword arguments for this release (``layer`` arrived in 0.5.18)."""
    from sglang.srt.layers.moe.moe_runner.base import MoeRunnerConfig

    if "layer" not in {f.name for f in dataclasses.fields(MoeRunnerConfig)}:
        kwargs.pop("layer", None)
    return kwargs


def llama4_runner_config(
    experts: int,
    hidden: int,
    intermediate: int,
    top_k: int = 1,
    on_input: bool = True,
    layer: Any = None,
) -> Any:
    """A ``MoeRunnerConfig`` as Llama 4 builds its MoE (SwiGLU, router weight on the input)."""
    from sglang.srt.layers.moe.moe_runner.base import MoeRunnerConfig

    return MoeRunnerConfig(
        **runner_config_kwargs(
            num_experts=experts,
            num_local_experts=experts,
            hidden_size=hidden,
            intermediate_size_per_partition=intermediate,
            top_k=top_k,
            activation="silu",
            is_gated=True,
            apply_router_weight_on_input=on_input,
            layer=layer,
        )
    )


def fused_moe_layer(num_experts: int, intermediate_size: int) -> Any:
    """SGLang's ``FusedMoE`` type (compressed-tensors matches its schemes by it) carrying the
    placement of a single-GPU layer, without building weights or process groups."""
    import torch
    from sglang.srt.layers.moe.fused_moe_triton import FusedMoE

    layer = FusedMoE.__new__(FusedMoE)
    torch.nn.Module.__init__(layer)
    layer.moe_tp_size, layer.moe_tp_rank, layer.moe_ep_size, layer.moe_ep_rank = 1, 0, 1, 0
    layer.num_experts = layer.num_local_experts = num_experts
    layer.intermediate_size_per_partition = intermediate_size
    return layer


@dataclasses.dataclass(frozen=True)
class LayerOutcome:
    """What happens to a checkpoint's first Llama 4 MoE layer on a simulated GPU."""

    runner: str | None  # the MoE runner the layer builds (or ``refused: why`` by SGLang)
    refused: str | None = None  # why this process refuses the layer when it is built
    # SGLang as it ships, on that runner: why the layer fails at its first forward (warm-up)
    fails_unpatched: str | None = None


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
    from sglang_nvfp4_patches.llama4_router_weight.method_lift import half_of, reading_of
    from sglang_nvfp4_patches.llama4_router_weight.runner_registry import (
        RUNNER_MODULE,
        no_prescale_of_its_own,
        upstream_prescale_problem,
    )

    if runner != "flashinfer_cutlass":
        return None
    half = half_of(method)
    if half is not None and (reading := reading_of(half, type(method))).rejects:
        return (
            f"{half.cls}.{half.checked_in} rejects apply_router_weight_on_input "
            f"({reading.summary()})"
        )
    problem = upstream_prescale_problem(importlib.import_module(RUNNER_MODULE))
    return None if problem is None else no_prescale_of_its_own(problem)


def llama4_layer_outcome(
    model_dir: Path,
    profile: GpuProfile,
    attention_backend: str | None = None,
    quantization: str | None = None,
    **flags: Any,
) -> LayerOutcome | None:
    """Build the checkpoint's first Llama 4 MoE layer as a scheduler would on ``profile``,
    through SGLang's own NVFP4 method (ModelOpt or compressed-tensors) and whatever hooks this
    process has: the runner it builds, whether it is refused, and whether SGLang as it ships
    would fail at warm-up there (``None``: not an NVFP4 MoE checkpoint). No weights are
    created and no kernel runs."""
    from sglang_nvfp4_patches.llama4_router_weight.refusals import RouterWeightOnInputError
    from sglang_nvfp4_patches.llama4_router_weight.rule import LLAMA4_ARCHITECTURES

    config = json.loads((model_dir / "config.json").read_text())
    quant_config = _nvfp4_quant_config(config)
    if quant_config is None or not LLAMA4_ARCHITECTURES & set(config.get("architectures") or ()):
        return None
    text_config = config.get("text_config", config)
    experts = int(text_config.get("num_local_experts", 1))
    intermediate = int(text_config.get("intermediate_size", 1))
    if attention_backend is not None:
        flags["attention_backend"] = attention_backend
    if quantization is not None:
        flags["quantization"] = quantization
    with (
        quiet_sglang(),
        device_capability(profile),
        published_scheduler_config(profile, model_dir, **flags),
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
