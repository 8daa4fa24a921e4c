"""How SGLang's Llama 4 and Gemma 4 build their MoE layers, read off a checkpoint's config
(pure: no SGLang, no torch).

The CPU simulation builds a real ``FusedMoE`` with exactly what the model passes it (Llama 4:
``apply_router_weight_on_input=True`` and its own routing method, no ``top_k``; Gemma 4:
``top_k`` and ``activation="gelu"``), at small sizes, and routes each token to the model's
number of experts. The gated activation is named as FlashInfer names it, for the reference.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sglang_nvfp4_patches.models import GEMMA4, LLAMA4, moe_family

# The prefix SGLang gives the first MoE layer's experts (quantization configs match it).
LLAMA4_EXPERTS = "language_model.model.layers.0.feed_forward.experts"
GEMMA4_EXPERTS = "model.language_model.layers.0.experts"


@dataclass(frozen=True)
class MoeModel:
    """One model family's first MoE layer, as its SGLang model builds it."""

    family: str  # "Llama 4" or "Gemma 4"
    prefix: str
    top_k: int  # experts per token
    gate_activation: str  # FlashInfer's ActivationType name: Swiglu or Geglu
    router_weight_on_input: bool
    # FusedMoE arguments the model passes besides sizes, quant config and prefix; a
    # ``routing_method_type`` is given by the name of SGLang's ``RoutingMethodType`` member.
    fused_moe_args: Mapping[str, Any] = field(default_factory=dict)


def text_config(config: Mapping[str, Any]) -> Mapping[str, Any]:
    inner = config.get("text_config")
    return inner if isinstance(inner, Mapping) else config


def moe_model(config: Mapping[str, Any]) -> MoeModel | None:
    """The MoE layer of a Llama 4 or Gemma 4 checkpoint's ``config.json`` (``None``: neither
    family, or a Gemma 4 without MoE blocks)."""
    architecture = next(iter(config.get("architectures") or ()), None)
    text = text_config(config)
    family = moe_family(architecture, text.get("enable_moe_block"))
    if family == LLAMA4:
        return MoeModel(
            LLAMA4,
            LLAMA4_EXPERTS,
            top_k=int(text.get("num_experts_per_tok", 1)),
            gate_activation="Swiglu",
            router_weight_on_input=True,
            fused_moe_args={"apply_router_weight_on_input": True, "routing_method_type": "Llama4"},
        )
    if family == GEMMA4:
        top_k = int(text.get("top_k_experts", 1))
        return MoeModel(
            GEMMA4,
            GEMMA4_EXPERTS,
            top_k=top_k,
            gate_activation="Geglu",
            router_weight_on_input=False,
            fused_moe_args={"top_k": top_k, "activation": "gelu"},
        )
    return None
