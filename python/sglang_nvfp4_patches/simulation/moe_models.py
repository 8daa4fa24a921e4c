"""How SGLang's MoE models build their MoE layers, read off a checkpoint's config (pure: no
SGLang, no torch).

The CPU simulation builds a real ``FusedMoE`` with what the model passes it, at small sizes,
and routes each token to the model's number of experts. Any MoE architecture is built from
the settings its config gives (:func:`..models.moe_settings`: activation, experts per token)
on ``FusedMoE``'s defaults otherwise; Llama 4 and Gemma 4 pass more than their configs say
(Llama 4: ``apply_router_weight_on_input=True`` and its own routing method, no ``top_k``;
Gemma 4: ``activation="gelu"``), which their models' code fixes and this module states. The
gated activation is named as FlashInfer names it, for the reference.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sglang_nvfp4_patches.models import GEMMA4, LLAMA4, moe_family, moe_settings

# The prefix SGLang gives the first MoE layer's experts (quantization configs match it).
LLAMA4_EXPERTS = "language_model.model.layers.0.feed_forward.experts"
GEMMA4_EXPERTS = "model.language_model.layers.0.experts"
# Any other architecture's first MoE layer (the decoder layers' usual ``mlp.experts``).
GENERIC_EXPERTS = "model.layers.0.mlp.experts"
# FlashInfer's gated activation for each FusedMoE activation the reference computes.
GATED = {"silu": "Swiglu", "gelu": "Geglu"}


@dataclass(frozen=True)
class MoeModel:
    """One model family's first MoE layer, as its SGLang model builds it."""

    family: str  # "Llama 4", "Gemma 4", or the architecture's name
    prefix: str
    top_k: int  # experts per token
    gate_activation: str | None  # FlashInfer's ActivationType name (None: not computed)
    router_weight_on_input: bool
    # FusedMoE arguments the model passes besides sizes, quant config and prefix; a
    # ``routing_method_type`` is given by the name of SGLang's ``RoutingMethodType`` member.
    fused_moe_args: Mapping[str, Any] = field(default_factory=dict)


# The fields of the text config each family's MoE layer is built from: experts per token
# and experts per layer (absent: the model's own default).
TOP_K_FIELD = {LLAMA4: "num_experts_per_tok", GEMMA4: "top_k_experts"}
EXPERTS_FIELD = {LLAMA4: "num_local_experts", GEMMA4: "num_experts"}
# Published MoE checkpoints have a few hundred experts per layer at most.
MAX_EXPERTS = 4096


def text_config(config: Mapping[str, Any]) -> Mapping[str, Any]:
    inner = config.get("text_config")
    return inner if isinstance(inner, Mapping) else config


def _family(config: Mapping[str, Any]) -> str | None:
    architecture = next(iter(config.get("architectures") or ()), None)
    if not isinstance(architecture, str):
        return None
    return moe_family(architecture, text_config(config).get("enable_moe_block"))


def moe_field_problem(config: Mapping[str, Any]) -> str | None:
    """What is wrong with the experts-per-token and experts fields the family's MoE layer is
    built from, in words naming the field and what to set (``None``: nothing, or not a Llama
    4 or Gemma 4 MoE config). Their type is checked before (explain's field_type_problem)."""
    family = _family(config)
    if family is None:
        return None
    text = text_config(config)
    where = "text_config." if text is not config else ""
    top_k_name, experts_name = TOP_K_FIELD[family], EXPERTS_FIELD[family]
    top_k, experts = text.get(top_k_name), text.get(experts_name)
    fix = f"set it as the published {family} checkpoint does"
    if experts is not None and not 1 <= experts <= MAX_EXPERTS:
        return (
            f'field "{where}{experts_name}" is {experts}: a {family} MoE layer has from 1 to '
            f"{MAX_EXPERTS} experts (published checkpoints: a few hundred at most); {fix}"
        )
    if top_k is not None and top_k < 1:
        return (
            f'field "{where}{top_k_name}" is {top_k}: each token goes to at least 1 expert; {fix}'
        )
    bound = experts if experts is not None else MAX_EXPERTS
    if top_k is not None and top_k > bound:
        of = f'the {experts} experts "{where}{experts_name}" gives' if experts else "any layer"
        return (
            f'field "{where}{top_k_name}" is {top_k}, more than {of}: a token goes to at most '
            f"every expert of its layer; {fix}"
        )
    return None


def moe_model(config: Mapping[str, Any]) -> MoeModel | None:
    """The first MoE layer of a checkpoint's ``config.json`` (``None``: it builds none)."""
    family = _family(config)
    text = text_config(config)
    if family == LLAMA4:
        return MoeModel(
            LLAMA4,
            LLAMA4_EXPERTS,
            top_k=int(text.get(TOP_K_FIELD[LLAMA4]) or 1),
            gate_activation="Swiglu",
            router_weight_on_input=True,
            fused_moe_args={"apply_router_weight_on_input": True, "routing_method_type": "Llama4"},
        )
    if family == GEMMA4:
        top_k = int(text.get(TOP_K_FIELD[GEMMA4]) or 1)
        return MoeModel(
            GEMMA4,
            GEMMA4_EXPERTS,
            top_k=top_k,
            gate_activation="Geglu",
            router_weight_on_input=False,
            fused_moe_args={"top_k": top_k, "activation": "gelu"},
        )
    settings = moe_settings(config)
    architecture = next(iter(config.get("architectures") or ()), None)
    if settings is None or not isinstance(architecture, str):
        return None
    return MoeModel(
        architecture,
        GENERIC_EXPERTS,
        top_k=settings.top_k,
        gate_activation=GATED.get(settings.activation),
        router_weight_on_input=False,
        fused_moe_args={"top_k": settings.top_k, "activation": settings.activation},
    )
