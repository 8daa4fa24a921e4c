"""A MoE layer built the way a scheduler builds it, on CPU: the published config, SGLang's
``FusedMoE`` placement and ``MoeRunnerConfig``; no weights, no kernel (:mod:`.moe_forward`)."""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sglang_nvfp4_patches.simulation.gpus import GpuProfile, simulated_gpu
from sglang_nvfp4_patches.simulation.moe_models import LLAMA4_EXPERTS
from sglang_nvfp4_patches.simulation.server_args import resolved_server_args

LLAMA4_MOE_PREFIX = LLAMA4_EXPERTS  # Llama 4's first MoE layer, as SGLang names it


@contextlib.contextmanager
def published_scheduler_config(profile: GpuProfile, model_dir: Path, **flags: Any) -> Iterator[Any]:
    """What a scheduler does first, on ``profile``'s simulated GPU: resolve the ServerArgs for
    ``model_dir`` (``flags`` as a user gives them), publish it, seed the MoE settings."""
    with simulated_gpu(profile):
        server_args = resolved_server_args(model_dir, **flags)
        try:
            from sglang.srt.runtime_context import publish
        except ImportError:  # no runtime_context.publish in this release
            from sglang.srt.server_args import set_global_server_args_for_scheduler

            set_global_server_args_for_scheduler(server_args)
        else:
            publish(server_args, role="scheduler")
        from sglang.srt.layers.moe.utils import initialize_moe_config

        if inspect.signature(initialize_moe_config).parameters:
            initialize_moe_config(server_args)
        else:
            initialize_moe_config()
        yield server_args


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

    kwargs: dict[str, Any] = {"layer": layer}  # ``layer`` arrived in 0.5.18
    if "layer" not in {f.name for f in dataclasses.fields(MoeRunnerConfig)}:
        kwargs = {}
    return MoeRunnerConfig(
        num_experts=experts,
        num_local_experts=experts,
        hidden_size=hidden,
        intermediate_size_per_partition=intermediate,
        top_k=top_k,
        activation="silu",
        is_gated=True,
        apply_router_weight_on_input=on_input,
        **kwargs,
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
