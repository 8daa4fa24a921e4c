"""The tensor transform behind ``llama4-router-weight``: top-1 router weight folded into the
expert input (torch, no SGLang import).

The CUTLASS kernel only scales expert *outputs*; for top-1 routing, multiplying each token's
hidden states by its router weight before quantization and handing the kernel unit final
scales is exact. Top-k > 1 and activations quantized before dispatch are refused
(:mod:`.refusals`).
"""

from __future__ import annotations

import torch

from sglang_nvfp4_patches.llama4_router_weight.refusals import (
    GENERIC_PREQUANTIZED_REMEDY,
    PreQuantizedActivationsError,
    RouterWeightOnInputError,
    TopKNotOneError,
    top_k_message,
)

# One float32 ones buffer per device, grown by doubling, handed out as a prefix view.
_unit_scale_buffers: dict[torch.device, torch.Tensor] = {}
# Outgrown buffers stay alive: CUDA graphs captured while they were current still read them.
_outgrown_unit_scale_buffers: list[torch.Tensor] = []


def unit_final_scales(num_tokens: int, device: torch.device) -> torch.Tensor:
    """Contiguous float32 ones of shape ``[num_tokens, 1]`` (a view of a cached buffer)."""
    buffer = _unit_scale_buffers.get(device)
    if buffer is None or buffer.shape[0] < num_tokens:
        if buffer is not None:
            _outgrown_unit_scale_buffers.append(buffer)
        capacity = max(64, 1 << max(num_tokens - 1, 0).bit_length())
        buffer = torch.ones((capacity, 1), dtype=torch.float32, device=device)
        _unit_scale_buffers[device] = buffer
    return buffer[:num_tokens]


def as_float32_final_scales(topk_weights: torch.Tensor) -> torch.Tensor:
    """The binding requires float32 ``token_final_scales``; a float32 input is returned as is."""
    return topk_weights.to(torch.float32)


def prescale_router_weight_on_input(
    hidden_states: torch.Tensor,
    topk_weights: torch.Tensor,
    hidden_states_scale: torch.Tensor | None = None,
    prequantized_remedy: str = GENERIC_PREQUANTIZED_REMEDY,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Fold top-1 router weights into the expert input: ``(hidden_states * w, ones)``, a new
    row-major tensor in the activations' dtype and float32 unit final scales ``[tokens, 1]``;
    ``prequantized_remedy`` ends the error for activations quantized before dispatch."""
    if hidden_states_scale is not None:
        raise PreQuantizedActivationsError(
            "apply_router_weight_on_input=True needs unquantized activations, but this "
            "FlashInfer CUTLASS call received activations already quantized before dispatch "
            "(hidden_states_scale is set). The router weight must multiply the activations "
            f"before quantization. {prequantized_remedy}"
        )
    if hidden_states.dim() != 2:
        raise RouterWeightOnInputError(
            "apply_router_weight_on_input expects hidden states of shape [tokens, hidden], "
            f"got shape {tuple(hidden_states.shape)}."
        )
    if topk_weights.dim() != 2 or topk_weights.shape[1] != 1:
        raise TopKNotOneError(top_k_message(f"topk_weights of shape {tuple(topk_weights.shape)}"))
    if topk_weights.shape[0] != hidden_states.shape[0]:
        raise RouterWeightOnInputError(
            f"topk_weights has {topk_weights.shape[0]} rows but hidden states have "
            f"{hidden_states.shape[0]} tokens; each token needs exactly one router weight."
        )
    # Row-major whatever the input layout: elementwise ops keep a transposed input's strides,
    # and the FlashInfer binding checks only the dtype before reading ``input`` as row-major.
    scaled = (hidden_states * topk_weights.to(hidden_states.dtype)).contiguous()
    return scaled, unit_final_scales(hidden_states.shape[0], hidden_states.device)
