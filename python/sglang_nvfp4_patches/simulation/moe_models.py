"""How SGLang's MoE models build their MoE layers, read off a checkpoint's config (pure: no
SGLang, no torch): any architecture from its config's settings (:func:`..models.moe_settings`),
Llama 4 and Gemma 4 with what their models' code adds (Llama 4: router weight on the input,
its own routing; Gemma 4: GELU). Gated activations are named as FlashInfer names them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sglang_nvfp4_patches.models import GEMMA4, LLAMA4, moe_family, moe_settings, text_part

# The prefix SGLang gives layer {}'s experts (quantization configs match it, ignore lists too).
EXPERTS_PREFIX = {
    LLAMA4: "language_model.model.layers.{}.feed_forward.experts",
    GEMMA4: "model.language_model.layers.{}.experts",
}
GENERIC_EXPERTS = "model.layers.{}.mlp.experts"  # any other architecture's
LLAMA4_EXPERTS = EXPERTS_PREFIX[LLAMA4].format(0)
GATED = {"silu": "Swiglu", "gelu": "Geglu"}  # FlashInfer's name of each FusedMoE activation


@dataclass(frozen=True)
class MoeModel:
    """One model family's first MoE layer, as its SGLang model builds it."""

    family: str  # "Llama 4", "Gemma 4", or the architecture's name
    index: int  # the first MoE layer's (the layers before it are dense)
    top_k: int  # experts per token
    gate_activation: str | None  # FlashInfer's ActivationType name (None: not computed)
    router_weight_on_input: bool
    # FusedMoE arguments besides sizes, quant config and prefix (``RoutingMethodType`` by name).
    fused_moe_args: Mapping[str, Any] = field(default_factory=dict)

    @property
    def prefix(self) -> str:
        return EXPERTS_PREFIX.get(self.family, GENERIC_EXPERTS).format(self.index)


# The text config's experts-per-token and experts fields (absent: the model's default).
TOP_K_FIELD = {LLAMA4: "num_experts_per_tok", GEMMA4: "top_k_experts"}
EXPERTS_FIELD = {LLAMA4: "num_local_experts", GEMMA4: "num_experts"}
# SGLang routes each token by int32 expert ids (its top-k routing's ``topk_ids``): no layer
# it serves has more experts.
MAX_EXPERTS = 2**31 - 1
# The layers searched for the first MoE one (a published checkpoint has at most a few hundred).
MAX_LAYERS = 10_000


def text_config(config: Mapping[str, Any]) -> Mapping[str, Any]:
    text = text_part(config)
    return text if isinstance(text, Mapping) else config


def _family(config: Mapping[str, Any]) -> str | None:
    architecture = next(iter(config.get("architectures") or ()), None)
    if not isinstance(architecture, str):
        return None
    return moe_family(architecture, text_config(config).get("enable_moe_block"))


def moe_field_problem(config: Mapping[str, Any]) -> str | None:
    """What is wrong with the experts-per-token and experts fields of a Llama 4 or Gemma 4 MoE
    config, naming the field and what to set (``None``: nothing); types are checked before."""
    family = _family(config)
    if family is None:
        return None
    text = text_config(config)
    where = "text_config." if "text_config" in config else ""
    top_k_name, experts_name = TOP_K_FIELD[family], EXPERTS_FIELD[family]
    top_k, experts = text.get(top_k_name), text.get(experts_name)
    fix = f"set it as the published {family} checkpoint does"
    if experts is not None and not 1 <= experts <= MAX_EXPERTS:
        return (
            f'field "{where}{experts_name}" is {experts}: a {family} MoE layer has from 1 to '
            f"{MAX_EXPERTS} experts (SGLang routes by int32 expert ids); {fix}"
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


def _whole(text: Mapping[str, Any], name: str) -> int | None:
    value = text.get(name)
    return value if type(value) is int else None


def _is_moe_layer(text: Mapping[str, Any], index: int) -> bool:
    """Whether layer ``index`` is MoE by each field SGLang's MoE models read (absent: every
    layer is): DeepSeek's family from ``first_k_dense_replace`` on, every ``moe_layer_freq``-th;
    Qwen2-MoE's every ``decoder_sparse_step``-th counted from 1, none of ``mlp_only_layers``;
    Llama 4's every ``interleave_moe_layer_step``-th; Nemotron-H's "E" in its pattern."""
    first, freq = _whole(text, "first_k_dense_replace"), _whole(text, "moe_layer_freq")
    step = _whole(text, "decoder_sparse_step")
    interleave = _whole(text, "interleave_moe_layer_step")
    dense = text.get("mlp_only_layers")
    pattern = text.get("hybrid_override_pattern")
    return not (
        (first is not None and index < first)
        or (freq is not None and freq > 0 and index % freq)
        or (step is not None and step > 0 and (index + 1) % step)
        or (interleave is not None and interleave > 0 and (index + 1) % interleave)
        or (isinstance(dense, list) and index in dense)
        or (isinstance(pattern, str) and pattern[index : index + 1] != "E")
    )


def first_moe_layer(config: Mapping[str, Any]) -> int | None:
    """The index of the checkpoint's first MoE layer (``None``: all its layers are dense)."""
    text = text_config(config)
    layers = _whole(text, "num_hidden_layers")
    pattern = text.get("hybrid_override_pattern")
    count = len(pattern) if isinstance(pattern, str) else MAX_LAYERS if layers is None else layers
    return next((i for i in range(min(count, MAX_LAYERS)) if _is_moe_layer(text, i)), None)


def moe_model(config: Mapping[str, Any]) -> MoeModel | None:
    """The first MoE layer of a checkpoint's ``config.json`` (``None``: it builds none)."""
    family = _family(config)
    text = text_config(config)
    index = first_moe_layer(config)
    if index is None:
        return None
    if family == LLAMA4:
        return MoeModel(
            LLAMA4,
            index,
            top_k=int(text.get(TOP_K_FIELD[LLAMA4]) or 1),
            gate_activation="Swiglu",
            router_weight_on_input=True,
            fused_moe_args={"apply_router_weight_on_input": True, "routing_method_type": "Llama4"},
        )
    if family == GEMMA4:
        top_k = int(text.get(TOP_K_FIELD[GEMMA4]) or 1)
        return MoeModel(
            GEMMA4,
            index,
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
        index,
        top_k=settings.top_k,
        gate_activation=GATED.get(settings.activation),
        router_weight_on_input=False,
        fused_moe_args={"top_k": settings.top_k, "activation": settings.activation},
    )
