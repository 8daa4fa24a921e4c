"""CPU reference of the contract of FlashInfer's ``cutlass_fused_moe`` (our own, for tests).

The kernel computes, per token ``t``::

    out[t] = sum_k token_final_scales[t, k] * expert_{ids[t, k]}(input[t])

with a gated SwiGLU expert ``w2 @ (silu(gate) * up)``, where ``fc1`` stacks ``[up; gate]``
along its output rows (FlashInfer's ``w31`` layout). Router weights only ever scale expert
*outputs*; that is the whole reason the ``llama4-router-weight`` patch exists. Computation is
float32; the result is cast to ``output_dtype``. An optional ``activation_quantizer``
stands in for the kernel's internal activation quantization (e.g. NVFP4 quantize+dequantize).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

ActivationQuantizer = Callable[[torch.Tensor], torch.Tensor]


def swiglu_expert(x: torch.Tensor, fc1: torch.Tensor, fc2: torch.Tensor) -> torch.Tensor:
    """One gated expert in float32; ``fc1`` ``[2*I, H]`` is ``[up; gate]``, ``fc2`` ``[H, I]``."""
    up, gate = (x.float() @ fc1.float().t()).chunk(2, dim=-1)
    return (torch.nn.functional.silu(gate) * up) @ fc2.float().t()


def cutlass_fused_moe_reference(
    input: torch.Tensor,
    token_selected_experts: torch.Tensor,
    token_final_scales: torch.Tensor,
    fc1_expert_weights: torch.Tensor,
    fc2_expert_weights: torch.Tensor,
    output_dtype: torch.dtype,
    activation_quantizer: ActivationQuantizer | None = None,
) -> torch.Tensor:
    """Reference output ``[tokens, hidden]`` of the kernel for unquantized expert weights."""
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
    x = input.float()
    if activation_quantizer is not None:
        x = activation_quantizer(x)
    out = torch.zeros(x.shape[0], fc2_expert_weights.shape[1], dtype=torch.float32)
    for slot in range(token_selected_experts.shape[1]):
        ids = token_selected_experts[:, slot]
        for expert in torch.unique(ids).tolist():
            rows = (ids == expert).nonzero(as_tuple=True)[0]
            y = swiglu_expert(x[rows], fc1_expert_weights[expert], fc2_expert_weights[expert])
            out[rows] += token_final_scales[rows, slot, None] * y
    return out.to(output_dtype)
