"""When may Llama 4's router weight go through the CUTLASS runner's pre-scale? (pure: no
SGLang, no torch)

Decided once per MoE layer when it is built, before weights load and CUDA-graph capture,
from what SGLang has fixed by then; what the pre-scale cannot make exact is refused.
"""

from __future__ import annotations

from dataclasses import dataclass

from sglang_nvfp4_patches.llama4_router_weight.refusals import (
    FP4_ALLGATHER_REMEDY,
    RouterWeightOnInputError,
    nvfp4_dispatch_remedy,
    prequantized_refusal,
    top_k_refusal,
    wrapper_refusal,
)

NAME = "llama4-router-weight"  # what users type (SGLANG_NVFP4_PATCHES_DISABLE) and doctor prints


@dataclass(frozen=True)
class LayerFacts:
    """One MoE layer built with ``apply_router_weight_on_input`` on the CUTLASS runner."""

    method: str  # the NVFP4 MoE method (class name) whose rejection is lifted
    wrapper: str | None  # the quant method in front of it, when it is not the layer's own
    top_k: int | None  # experts per token; None where the release cannot say at build time
    fp4_allgather: bool  # activations quantized to FP4 before the DP all-gather
    nvfp4_dispatch: bool  # activations quantized to NVFP4 by the all-to-all dispatch
    dispatch_type_flag: bool  # the release sets that dtype with --flashinfer-a2a-dispatch-type


def refusal_for(facts: LayerFacts) -> RouterWeightOnInputError | None:
    """The error to raise while building this layer, or ``None``: lift SGLang's rejection."""
    if facts.wrapper is not None:
        return wrapper_refusal(facts.wrapper, facts.method)
    if facts.top_k is not None and facts.top_k != 1:
        return top_k_refusal(facts.top_k)
    if facts.fp4_allgather:
        return prequantized_refusal(FP4_ALLGATHER_REMEDY)
    if facts.nvfp4_dispatch:
        return prequantized_refusal(nvfp4_dispatch_remedy(facts.dispatch_type_flag))
    return None
