"""CPU reference of the contract of FlashInfer's ``cutlass_fused_moe`` (our own, for tests):
``out[t] = sum_k token_final_scales[t, k] * expert_{ids[t, k]}(input[t])``, a gated expert
``w2 @ (act(gate) * up)`` with ``fc1`` stacking ``[up; gate]`` (FlashInfer's ``w31``) and
``act`` SiLU (``Swiglu``, Llama 4) or exact GELU (``Geglu``, Gemma 4), in float32. Router
weights only scale expert *outputs*: why ``llama4-router-weight`` exists. Under expert
parallelism the ids stay global and rank ``ep_rank`` adds only its own ``E`` experts
``[ep_rank*E, (ep_rank+1)*E)``; under tensor parallelism each rank holds a slice of every
expert: either way the ranks' outputs are partial sums.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

ActivationQuantizer = Callable[[torch.Tensor], torch.Tensor]

# The gate activation of each gated expert kind, by FlashInfer's ``ActivationType`` name.
GATE_ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "Swiglu": torch.nn.functional.silu,
    "Geglu": torch.nn.functional.gelu,  # exact (erf) GELU; GegluTanh is another type
}


def gated_expert(
    x: torch.Tensor, fc1: torch.Tensor, fc2: torch.Tensor, activation: str = "Swiglu"
) -> torch.Tensor:
    """One gated expert in float32; ``fc1`` ``[2*I, H]`` is ``[up; gate]``, ``fc2`` ``[H, I]``."""
    up, gate = (x.float() @ fc1.float().t()).chunk(2, dim=-1)
    return (GATE_ACTIVATIONS[activation](gate) * up) @ fc2.float().t()


def cutlass_fused_moe_reference(
    input: torch.Tensor,
    token_selected_experts: torch.Tensor,
    token_final_scales: torch.Tensor,
    fc1_expert_weights: torch.Tensor,
    fc2_expert_weights: torch.Tensor,
    output_dtype: torch.dtype,
    activation_quantizer: ActivationQuantizer | None = None,
    activation: str = "Swiglu",
    ep_size: int = 1,
    ep_rank: int = 0,
) -> torch.Tensor:
    """Reference output ``[tokens, hidden]`` of the kernel for unquantized expert weights."""
    if activation not in GATE_ACTIVATIONS:
        raise ValueError(
            f"no CPU reference for the {activation} activation; this reference computes "
            f"{', '.join(GATE_ACTIVATIONS)}"
        )
    if token_final_scales.dtype != torch.float32:
        raise TypeError(
            "token_final_scales must be float32 (the FlashInfer binding rejects other "
            f"dtypes); got {token_final_scales.dtype}"
        )
    if token_selected_experts.shape != token_final_scales.shape:
        raise ValueError(
            f"expert ids {tuple(token_selected_experts.shape)} and final scales "
            f"{tuple(token_final_scales.shape)} must have the same [tokens, top_k] shape"
        )
    if not 0 <= ep_rank < ep_size:
        raise ValueError(f"ep_rank {ep_rank} is outside an expert-parallel group of {ep_size}")
    local = fc1_expert_weights.shape[0]
    first = ep_rank * local
    x = input.float()
    if activation_quantizer is not None:
        x = activation_quantizer(x)
    out = torch.zeros(x.shape[0], fc2_expert_weights.shape[1], dtype=torch.float32)
    for slot in range(token_selected_experts.shape[1]):
        ids = token_selected_experts[:, slot]
        for expert in torch.unique(ids).tolist():
            if not first <= expert < first + local:
                continue  # another rank's expert
            rows = (ids == expert).nonzero(as_tuple=True)[0]
            fc1 = fc1_expert_weights[expert - first]
            fc2 = fc2_expert_weights[expert - first]
            y = gated_expert(x[rows], fc1, fc2, activation)
            out[rows] += token_final_scales[rows, slot, None] * y
    return out.to(output_dtype)
