"""The model families the patches serve, by the architecture names their checkpoints publish
(pure: no SGLang, no torch). Each patch says which of them it concerns."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

# Gemma 4: MoE when its text config sets ``enable_moe_block``.
GEMMA4_ARCHITECTURES: frozenset[str] = frozenset(
    {"Gemma4ForConditionalGeneration", "Gemma4ForCausalLM", "Gemma4UnifiedForConditionalGeneration"}
)
# Llama 4: MoE layers built with ``apply_router_weight_on_input=True``.
LLAMA4_ARCHITECTURES: frozenset[str] = frozenset(
    {"Llama4ForConditionalGeneration", "Llama4ForCausalLM"}
)

LLAMA4, GEMMA4 = "Llama 4", "Gemma 4"


def architecture(config: Mapping[str, object]) -> str | None:
    """The first listed architecture, as SGLang picks the model class."""
    architectures = config.get("architectures")
    if isinstance(architectures, list) and architectures and isinstance(architectures[0], str):
        return architectures[0]
    return None


def moe_family(architecture: str | None, enable_moe_block: object = None) -> str | None:
    """The family whose MoE model ``architecture`` is (Gemma 4: with MoE blocks on), or None."""
    if architecture in LLAMA4_ARCHITECTURES:
        return LLAMA4
    if architecture in GEMMA4_ARCHITECTURES and bool(enable_moe_block):
        return GEMMA4
    return None


# A MoE layer's settings, read off any config by the fields SGLang's MoE models read: experts
# per layer (none: no MoE layer), experts per token, and the gated activation.
EXPERTS_FIELDS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")
TOP_K_FIELDS = ("num_experts_per_tok", "top_k_experts", "moe_topk", "num_experts_per_token")
# Nemotron-H names its experts' activation apart from the rest of the model's.
ACTIVATION_FIELDS = ("mlp_hidden_act", "hidden_act", "hidden_activation")
MIN_MOE_EXPERTS = 2  # fewer experts per layer: read as no MoE layer
DEFAULT_ACTIVATION = "silu"  # FusedMoE's, where the config names none


def _field(config: object, name: str) -> object:
    if isinstance(config, Mapping):
        return config.get(name)
    return getattr(config, name, None)


def text_part(config: object) -> object:
    """The text model's config: ``text_config`` where the checkpoint nests one; a null one in
    a config.json stands for the model's defaults (an empty mapping: no top-level field)."""
    if isinstance(config, Mapping) and "text_config" in config:
        inner = config["text_config"]
        return inner if isinstance(inner, Mapping) else {}
    inner = _field(config, "text_config")
    return inner if inner is not None and not isinstance(inner, (str, int, float)) else config


def first_set(config: object, names: tuple[str, ...]) -> tuple[str, object] | None:
    """The first of ``names`` the config sets (to anything but null), and its value."""
    return next(((n, v) for n in names if (v := _field(config, n)) is not None), None)


def _first(config: object, names: tuple[str, ...]) -> object:
    found = first_set(config, names)
    return found[1] if found is not None else None


def _activation(name: object) -> str:
    """FusedMoE's name for a config's activation (``gelu_pytorch_tanh`` is ``gelu``)."""
    if not isinstance(name, str) or not name:
        return DEFAULT_ACTIVATION
    lowered = name.lower()
    if lowered.startswith("gelu"):
        return "gelu"
    if lowered in ("silu", "swish", "swiglu"):
        return "silu"
    return lowered


@dataclass(frozen=True)
class MoeSettings:
    """What a MoE layer's fate depends on, beyond the GPU and the launch line."""

    activation: str  # as FusedMoE takes it: silu, gelu, relu2, ...
    top_k: int  # experts per token

    @property
    def key(self) -> str:
        """``silu, top-1`` or ``gelu, top-k``: the evidence is kept per such key."""
        return f"{self.activation}, top-{1 if self.top_k == 1 else 'k'}"


def moe_settings(config: object) -> MoeSettings | None:
    """The MoE layer settings of a checkpoint's config (mapping or HF object), ``None`` where it
    builds no MoE layer (at most one expert, or ``enable_moe_block`` off)."""
    text = text_part(config)
    switch = "enable_moe_block"
    present = switch in text if isinstance(text, Mapping) else hasattr(text, switch)
    if present and not _field(text, switch):
        return None
    experts = _first(text, EXPERTS_FIELDS)
    if not isinstance(experts, int) or isinstance(experts, bool) or experts < MIN_MOE_EXPERTS:
        return None
    top_k = _first(text, TOP_K_FIELDS)
    top_k = top_k if isinstance(top_k, int) and not isinstance(top_k, bool) and top_k > 0 else 1
    return MoeSettings(_activation(_first(text, ACTIVATION_FIELDS)), top_k)
