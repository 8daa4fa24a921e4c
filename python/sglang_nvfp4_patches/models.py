"""The model families the patches serve, by the architecture names their checkpoints publish
(pure: no SGLang, no torch). Each patch says which of them it concerns."""

from __future__ import annotations

# Gemma 4: MoE when its text config sets ``enable_moe_block``.
GEMMA4_ARCHITECTURES: frozenset[str] = frozenset(
    {
        "Gemma4ForConditionalGeneration",
        "Gemma4ForCausalLM",
        "Gemma4UnifiedForConditionalGeneration",
    }
)
# Llama 4: MoE layers built with ``apply_router_weight_on_input=True``.
LLAMA4_ARCHITECTURES: frozenset[str] = frozenset(
    {"Llama4ForConditionalGeneration", "Llama4ForCausalLM"}
)

LLAMA4, GEMMA4 = "Llama 4", "Gemma 4"


def moe_family(architecture: str | None, enable_moe_block: object = None) -> str | None:
    """The family whose MoE model ``architecture`` is (Gemma 4 only with its MoE blocks on:
    the checkpoint may omit the key, set null, or use 0/1), else ``None``."""
    if architecture in LLAMA4_ARCHITECTURES:
        return LLAMA4
    if architecture in GEMMA4_ARCHITECTURES and bool(enable_moe_block):
        return GEMMA4
    return None
