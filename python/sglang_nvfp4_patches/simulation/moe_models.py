"""How SGLang's MoE models build their MoE layers, read off a checkpoint's config (pure: no
SGLang, no torch): any architecture from its config's settings (:func:`..models.moe_settings`),
Llama 4 and Gemma 4 with what their models' code adds (Llama 4: router weight on the input,
its own routing; Gemma 4: GELU). Gated activations are named as FlashInfer names them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sglang_nvfp4_patches.models import (
    EXPERTS_FIELDS,
    GEMMA4,
    GEMMA4_ARCHITECTURES,
    LLAMA4,
    MIN_MOE_EXPERTS,
    TOP_K_FIELDS,
    architecture,
    first_set,
    moe_family,
    moe_settings,
    text_part,
)

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


# The text config's experts-per-token and experts fields (absent: the model's default) of
# Llama 4 and Gemma 4; any other architecture's are read as moe_settings reads them.
TOP_K_FIELD = {LLAMA4: "num_experts_per_tok", GEMMA4: "top_k_experts"}
EXPERTS_FIELD = {LLAMA4: "num_local_experts", GEMMA4: "num_experts"}
# SGLang routes each token by int32 expert ids (its top-k routing's ``topk_ids``): no layer
# it serves has more experts.
MAX_EXPERTS = 2**31 - 1
# The layers searched for the first MoE one (a published checkpoint has at most a few hundred).
MAX_LAYERS = 10_000
# Architectures whose SGLang decoder layers build a MoE block whatever its expert count (0
# experts fails there, 1 is a layer of one), each with the text config field before whose
# layer index layers are dense, if any (then every ``moe_layer_freq``-th layer is sparse).
# Others may build dense layers from fewer than 2 experts (Hunyuan, Grok, ...), as explain
# reads it. test_config_refusals.py asks SGLang's layers.
SPARSE_AT_ANY_COUNT: dict[str, str | None] = {
    "Qwen3MoeForCausalLM": None,
    "Qwen3VLMoeForConditionalGeneration": None,
    "Qwen2MoeForCausalLM": None,
    "MixtralForCausalLM": None,
    "MiniMaxM2ForCausalLM": None,
    "GptOssForCausalLM": None,
    "DeepseekV2ForCausalLM": "first_k_dense_replace",
    "DeepseekV3ForCausalLM": "first_k_dense_replace",  # DeepSeek-V3, Kimi-K2
    "Glm4MoeForCausalLM": "first_k_dense_replace",
}


def text_config(config: Mapping[str, Any]) -> Mapping[str, Any]:
    text = text_part(config)
    return text if isinstance(text, Mapping) else config


def _family(config: Mapping[str, Any]) -> str | None:
    return moe_family(architecture(config), text_config(config).get("enable_moe_block"))


def _whole(value: object) -> int | None:
    return value if type(value) is int else None


def _sparse_at_any_count(architecture: str, text: Mapping[str, Any]) -> bool:
    """Whether SGLang's model of ``architecture`` builds a MoE block in some layer whatever the
    expert count (a dense-layers field absent or not a whole number: not known here)."""
    if architecture not in SPARSE_AT_ANY_COUNT:
        return False
    dense_field = SPARSE_AT_ANY_COUNT[architecture]
    if dense_field is None:
        return True
    first, layers = _whole(text.get(dense_field)), _whole(text.get("num_hidden_layers"))
    every = _whole(text.get("moe_layer_freq", 1))
    if first is None or layers is None or every is None or every < 1:
        return False
    return -(-max(first, 0) // every) * every < layers  # the first sparse layer exists


@dataclass(frozen=True)
class MoeCounts:
    """A MoE config's experts and experts-per-token fields, as its SGLang model reads them."""

    family: str  # "Llama 4", "Gemma 4", or the architecture's name
    where: str  # the path to the text config: "text_config." or ""
    experts: tuple[str, object] | None  # (field, value) set; None: the model's default
    top_k: tuple[str, object] | None
    # Fewer experts build dense layers (None: a MoE layer at any count)
    dense_below: int | None

    def path(self, field: tuple[str, object]) -> str:
        return f"{self.where}{field[0]}"


def moe_counts(config: Mapping[str, Any]) -> MoeCounts | None:
    """The expert counts of a checkpoint's MoE layers (``None``: explain reads none, and the
    model's defaults are not known here)."""
    arch = architecture(config)
    if arch is None:
        return None
    text = text_config(config)
    where = "text_config." if "text_config" in config else ""
    family = _family(config)
    if family is not None:
        experts, top_k = EXPERTS_FIELD[family], TOP_K_FIELD[family]
        # Llama 4 without interleaving: a layer is MoE by its expert count alone (above 0)
        by_count = family == LLAMA4 and text.get("interleave_moe_layer_step", 1) == 0
        return MoeCounts(
            family,
            where,
            (experts, text[experts]) if text.get(experts) is not None else None,
            (top_k, text[top_k]) if text.get(top_k) is not None else None,
            1 if by_count else None,
        )
    if arch in GEMMA4_ARCHITECTURES or not text.get("enable_moe_block", True):
        return None  # MoE blocks off: dense layers
    experts_set = first_set(text, EXPERTS_FIELDS)
    any_count = _sparse_at_any_count(arch, text)
    if experts_set is None and not any_count:
        return None
    return MoeCounts(
        arch,
        where,
        experts_set,
        first_set(text, TOP_K_FIELDS),
        None if any_count else MIN_MOE_EXPERTS,
    )


def moe_field_problem(config: Mapping[str, Any]) -> str | None:
    """What is wrong with the experts and experts-per-token fields of a MoE config, naming the
    field by its path and what to set (``None``: nothing); any other type than a whole number
    is left to SGLang (Llama 4's and Gemma 4's are checked before)."""
    counts = moe_counts(config)
    if counts is None:
        return None
    experts = _whole(counts.experts[1]) if counts.experts else None
    experts_field = counts.path(counts.experts) if counts.experts else ""
    if experts is not None and counts.dense_below is not None and experts < counts.dense_below:
        return None  # dense layers: the MoE fields are not read
    fix = f"set it as the published {counts.family} checkpoint does"
    if experts is not None and not 1 <= experts <= MAX_EXPERTS:
        return (
            f'field "{experts_field}" is {experts}: a {counts.family} MoE layer has from 1 to '
            f"{MAX_EXPERTS} experts (SGLang builds one of this many and routes by int32 expert "
            f"ids); {fix}"
        )
    top_k = _whole(counts.top_k[1]) if counts.top_k else None
    if counts.top_k is None or top_k is None:
        return None
    field = counts.path(counts.top_k)
    if top_k < 1:
        return f'field "{field}" is {top_k}: each token goes to at least 1 expert; {fix}'
    if top_k > (experts if experts is not None else MAX_EXPERTS):
        of = (
            "any layer"
            if experts is None
            else f'the {experts} expert{"s" * (experts != 1)} "{experts_field}" gives'
        )
        return (
            f'field "{field}" is {top_k}, more than {of}: a token goes to at most every expert '
            f"of its layer; {fix}"
        )
    return None


def _is_moe_layer(text: Mapping[str, Any], index: int) -> bool:
    """Whether layer ``index`` is MoE by each field SGLang's MoE models read (absent: every
    layer is): DeepSeek's family from ``first_k_dense_replace`` on, every ``moe_layer_freq``-th;
    Qwen2-MoE's every ``decoder_sparse_step``-th counted from 1, none of ``mlp_only_layers``;
    Llama 4's every ``interleave_moe_layer_step``-th; Nemotron-H's "E" in its pattern."""
    first, freq = _whole(text.get("first_k_dense_replace")), _whole(text.get("moe_layer_freq"))
    step = _whole(text.get("decoder_sparse_step"))
    interleave = _whole(text.get("interleave_moe_layer_step"))
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
    layers = _whole(text.get("num_hidden_layers"))
    pattern = text.get("hybrid_override_pattern")
    count = len(pattern) if isinstance(pattern, str) else MAX_LAYERS if layers is None else layers
    return next((i for i in range(min(count, MAX_LAYERS)) if _is_moe_layer(text, i)), None)


def moe_count_reading(config: Mapping[str, Any]) -> str | None:
    """What explain reads off an experts field of fewer than 2 experts outside Llama 4 and
    Gemma 4 (no MoE layer), naming the field; ``None`` where it reads a MoE layer."""
    counts = moe_counts(config)
    if counts is None or counts.experts is None or counts.family in TOP_K_FIELD:
        return None
    experts = _whole(counts.experts[1])
    if experts is None or experts >= MIN_MOE_EXPERTS:
        return None
    return (
        f'field "{counts.path(counts.experts)}" is {experts}: explain reads no MoE layer '
        f"(fewer than {MIN_MOE_EXPERTS} experts)"
    )


def moe_model(config: Mapping[str, Any]) -> MoeModel | None:
    """The first MoE layer of a checkpoint's ``config.json`` (``None``: it builds none)."""
    family = _family(config)
    text = text_config(config)
    index = first_moe_layer(config)
    if index is None:
        return None
    if family == LLAMA4:
        on_input = {"apply_router_weight_on_input": True, "routing_method_type": "Llama4"}
        top_k = int(text.get(TOP_K_FIELD[LLAMA4]) or 1)
        return MoeModel(
            LLAMA4,
            index,
            top_k,
            gate_activation="Swiglu",
            router_weight_on_input=True,
            fused_moe_args=on_input,
        )
    if family == GEMMA4:
        top_k = int(text.get(TOP_K_FIELD[GEMMA4]) or 1)
        return MoeModel(
            GEMMA4,
            index,
            top_k,
            gate_activation="Geglu",
            router_weight_on_input=False,
            fused_moe_args={"top_k": top_k, "activation": "gelu"},
        )
    settings, arch = moe_settings(config), architecture(config)
    if settings is None or arch is None:
        return None
    return MoeModel(
        arch,
        index,
        settings.top_k,
        gate_activation=GATED.get(settings.activation),
        router_weight_on_input=False,
        fused_moe_args={"top_k": settings.top_k, "activation": settings.activation},
    )
