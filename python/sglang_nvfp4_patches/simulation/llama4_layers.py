"""Llama 4 NVFP4 MoE layers built the way ``FusedMoE`` builds them, through SGLang's real
quantization methods (ModelOpt: :func:`modelopt_layer`; compressed-tensors from the bundled
config: :func:`compressed_tensors_layer`), with weights a CPU decodes exactly (random FP4
codes, every scale 1). Each keeps its float weights, for what Llama 4 means
(:func:`sglang_nvfp4_patches.reference.moe_meaning.moe_meaning`).
"""

from __future__ import annotations

import dataclasses
import importlib
import json
from dataclasses import dataclass
from typing import Any

import torch

from sglang_nvfp4_patches.simulation.bundled import LLAMA4_NVFP4_CT
from sglang_nvfp4_patches.simulation.cutlass_kernel import (
    E4M3_ONE,
    MODELOPT_MODULE,
    random_batch,
    random_fp4,
)
from sglang_nvfp4_patches.simulation.moe_forward import forward
from sglang_nvfp4_patches.simulation.moe_models import LLAMA4_EXPERTS

HIDDEN, INTERMEDIATE, EXPERTS = 64, 64, 4


def llama4_runner_config(
    experts: int,
    hidden: int,
    intermediate: int,
    top_k: int | None = 1,
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
    from sglang.srt.layers.moe.fused_moe_triton import FusedMoE

    layer = FusedMoE.__new__(FusedMoE)
    torch.nn.Module.__init__(layer)
    layer.moe_tp_size, layer.moe_tp_rank, layer.moe_ep_size, layer.moe_ep_rank = 1, 0, 1, 0
    layer.num_experts = layer.num_local_experts = num_experts
    layer.intermediate_size_per_partition = intermediate_size
    return layer


@dataclass
class Llama4Layer:
    """One MoE layer: SGLang's layer, its method, its runner config and its float weights."""

    layer: Any
    method: Any
    runner_config: Any
    w13: torch.Tensor  # [experts, 2 * intermediate, hidden], rows [up; gate]
    w2: torch.Tensor  # [experts, hidden, intermediate]

    def build(self) -> None:
        """``FusedMoE``'s call once the layer's weights exist."""
        self.method.create_moe_runner(self.layer, self.runner_config)

    @property
    def holder(self) -> Any:
        """The object whose ``moe_runner_config`` the check reads (compressed-tensors: scheme)."""
        return getattr(self.layer, "scheme", None) or self.method

    def apply(
        self,
        x: torch.Tensor,
        weights: torch.Tensor,
        ids: torch.Tensor,
        x_scale: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``FusedMoE``'s forward through the method; ``x_scale``: of activations quantized."""
        return forward(self.layer, x, weights, ids, x_scale)


def _unit_scaled_weights(seed: int) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(seed)
    w13, w13_packed = random_fp4((EXPERTS, 2 * INTERMEDIATE, HIDDEN), generator)
    w2, w2_packed = random_fp4((EXPERTS, HIDDEN, INTERMEDIATE), generator)
    return w13, w13_packed, w2, w2_packed


def modelopt_layer(top_k: int | None = 1, on_input: bool = True, seed: int = 0) -> Llama4Layer:
    """A ModelOpt NVFP4 Llama 4 MoE layer, as post-processed (inside a simulated scheduler)."""
    modelopt = importlib.import_module(MODELOPT_MODULE)
    quant_config = modelopt.ModelOptFp4Config.from_config(
        {"quantization": {"quant_algo": "NVFP4", "group_size": 16, "exclude_modules": []}}
    )
    layer = fused_moe_layer(EXPERTS, INTERMEDIATE)
    layer.quant_method = modelopt.ModelOptNvFp4FusedMoEMethod(quant_config)
    w13, w13_packed, w2, w2_packed = _unit_scaled_weights(seed)
    layer.w13_weight, layer.w2_weight = w13_packed, w2_packed
    unit = {"fill_value": E4M3_ONE, "dtype": torch.uint8}  # every block scale 1.0
    layer.w13_blockscale_swizzled = torch.full((EXPERTS, 2 * INTERMEDIATE, HIDDEN // 16), **unit)
    layer.w2_blockscale_swizzled = torch.full((EXPERTS, HIDDEN, INTERMEDIATE // 16), **unit)
    for name in ("w13_input_scale_quant", "g1_alphas", "w2_input_scale_quant", "g2_alphas"):
        setattr(layer, name, torch.ones(EXPERTS))
    layer._cutlass_swiglu_params = (None, None, None)
    layer._mega_moe_nvfp4 = False
    config = llama4_runner_config(
        EXPERTS, HIDDEN, INTERMEDIATE, top_k=top_k, on_input=on_input, layer=layer
    )
    return Llama4Layer(layer, layer.quant_method, config, w13, w2)


def compressed_tensors_layer(top_k: int | None = 1, seed: int = 0) -> Llama4Layer:
    """A compressed-tensors NVFP4 Llama 4 MoE layer, weights made by the scheme and filled."""
    from sglang.srt.layers.quantization.compressed_tensors.compressed_tensors import (
        CompressedTensorsConfig,
    )

    config = json.loads((LLAMA4_NVFP4_CT / "config.json").read_text())
    quant_config = CompressedTensorsConfig.from_config(config["quantization_config"])
    layer = fused_moe_layer(EXPERTS, INTERMEDIATE)
    layer.quant_method = quant_config.get_quant_method(layer, prefix=LLAMA4_EXPERTS)
    layer.scheme.create_weights(
        layer=layer,
        num_experts=EXPERTS,
        hidden_size=HIDDEN,
        intermediate_size_per_partition=INTERMEDIATE,
        params_dtype=torch.bfloat16,
        weight_loader=lambda *_args, **_kwargs: None,
    )
    w13, w13_packed, w2, w2_packed = _unit_scaled_weights(seed)
    with torch.no_grad():
        layer.w13_weight_packed.copy_(w13_packed)
        layer.w2_weight_packed.copy_(w2_packed)
        for name in ("w13_weight_scale", "w2_weight_scale"):
            getattr(layer, name).view(torch.uint8).fill_(E4M3_ONE)
        for name, param in layer.named_parameters():
            if name.endswith("global_scale"):
                param.fill_(1.0)
    runner_config = llama4_runner_config(EXPERTS, HIDDEN, INTERMEDIATE, top_k=top_k, layer=layer)
    return Llama4Layer(layer, layer.quant_method, runner_config, w13, w2)


def runs_on_flashinfer_cutlass(moe: Llama4Layer) -> bool:
    backend = getattr(getattr(moe.holder, "runner", None), "runner_backend", None)
    return backend is not None and bool(backend.is_flashinfer_cutlass())


def batch(
    tokens: int, top_k: int, dtype: torch.dtype, seed: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A batch for these layers (:func:`.cutlass_kernel.random_batch`)."""
    return random_batch(tokens, HIDDEN, EXPERTS, top_k, dtype, seed)
