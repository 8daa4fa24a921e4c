"""What a MoE layer means, token by token in float32 (our own reference, apart from the
kernel stand-in's batched one): with the router weight on the input (Llama 4) each token's
output is ``expert(x * w)``; otherwise ``sum_k w_k * expert_k(x)``."""

from __future__ import annotations

import torch

from sglang_nvfp4_patches.reference.cutlass_moe_contract import GATE_ACTIVATIONS


def moe_meaning(
    x: torch.Tensor,
    weights: torch.Tensor,
    ids: torch.Tensor,
    w13: torch.Tensor,
    w2: torch.Tensor,
    on_input: bool,
    activation: str = "Swiglu",
) -> torch.Tensor:
    """``[tokens, hidden]`` in float32; ``w13`` ``[experts, 2*I, H]`` holds ``[up; gate]``
    rows, ``w2`` ``[experts, H, I]``; ``activation`` is the gate's (a FlashInfer
    ``ActivationType`` name the reference computes)."""
    gate_activation = GATE_ACTIVATIONS[activation]
    intermediate = w2.shape[2]
    rows = []
    for t in range(x.shape[0]):
        total = torch.zeros(w2.shape[1])
        for k in range(ids.shape[1]):
            expert, weight = int(ids[t, k]), weights[t, k]
            token = x[t] * weight.to(x.dtype) if on_input else x[t]
            h = w13[expert].float() @ token.float()
            up, gate = h[:intermediate], h[intermediate:]
            y = w2[expert].float() @ (gate_activation(gate) * up)
            total += y if on_input else weight * y
        rows.append(total)
    return torch.stack(rows)
