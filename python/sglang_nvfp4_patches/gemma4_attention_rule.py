"""Pure decision behind the ``gemma4-attention`` patch (no SGLang import).

SGLang defaults Gemma 4 to ``trtllm_mha`` on SM10X. For the NVFP4 (``modelopt_fp4``) MoE
checkpoint that default was measured to collapse accuracy (MMLU 0.622 on triton vs 0.037;
-2.09 pp, McNemar chi2 34.6 in sglang#26518), while BF16 MoE and NVFP4 dense are fine. The
rule: for exactly that combination, and only when the user chose no attention backend, pick
``triton``. An explicit choice is always honoured; ``trtllm_mha`` chosen explicitly earns a
warning.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

GEMMA4_ARCHITECTURES: frozenset[str] = frozenset(
    {
        "Gemma4ForConditionalGeneration",
        "Gemma4ForCausalLM",
        "Gemma4UnifiedForConditionalGeneration",
    }
)
NVFP4_QUANTIZATION = "modelopt_fp4"
SAFE_BACKEND = "triton"
AFFECTED_BACKEND = "trtllm_mha"
SM10X_MAJOR = 10


class Gemma4Action(enum.Enum):
    """What the patch does to the attention backend for one server configuration."""

    LEAVE = "leave"  # SGLang's own resolution stands.
    USE_TRITON = "use_triton"  # Default the unset attention backend to triton.


@dataclass(frozen=True)
class Gemma4Facts:
    """What the rule needs to know, read off ServerArgs, the HF config and the GPU."""

    architecture: str | None
    quantization: str | None
    enable_moe_block: object
    compute_capability_major: int | None
    attention_backend: str | None = None
    prefill_attention_backend: str | None = None
    decode_attention_backend: str | None = None


@dataclass(frozen=True)
class Gemma4Decision:
    action: Gemma4Action
    reason: str
    # The user asked for trtllm_mha on the affected combination: honoured, but warned about.
    warn_explicit_trtllm: bool = False

    @property
    def attention_backend(self) -> str | None:
        """The ``attention_backend`` value to declare, or None to leave SGLang's."""
        return SAFE_BACKEND if self.action is Gemma4Action.USE_TRITON else None


def is_nvfp4_moe_on_sm10x(facts: Gemma4Facts) -> bool:
    """The one combination measured to lose accuracy on ``trtllm_mha``."""
    return (
        facts.architecture in GEMMA4_ARCHITECTURES
        and facts.quantization == NVFP4_QUANTIZATION
        # The checkpoint may omit the key, set null, or use 0/1: bool() answers all.
        and bool(facts.enable_moe_block)
        and facts.compute_capability_major == SM10X_MAJOR
    )


def decide_gemma4_attention(facts: Gemma4Facts) -> Gemma4Decision:
    """Decide the Gemma 4 attention default for one configuration.

    Mirrors SGLang's own Gemma 4 provider: with no backend given the default applies; with
    one split side given, ``attention_backend`` (the unset side's fallback) gets the same
    default; with ``--attention-backend`` or both split sides given nothing is defaulted.
    """
    if not is_nvfp4_moe_on_sm10x(facts):
        return Gemma4Decision(
            Gemma4Action.LEAVE,
            "not Gemma 4 NVFP4 MoE on SM10X; SGLang's default is unaffected",
        )
    given = [
        backend
        for backend in (
            facts.attention_backend,
            facts.prefill_attention_backend,
            facts.decode_attention_backend,
        )
        if backend is not None
    ]
    warn = AFFECTED_BACKEND in given
    if facts.attention_backend is not None or len(given) == 2:
        return Gemma4Decision(
            Gemma4Action.LEAVE,
            "the attention backend was given explicitly (" + ", ".join(given) + "); honoured",
            warn_explicit_trtllm=warn,
        )
    reason = (
        "Gemma 4 NVFP4 (modelopt_fp4) MoE on SM10X loses accuracy with trtllm_mha "
        "(sglang#26518); defaulting the attention backend to triton"
    )
    if given:
        reason += f" for the split side that was not given ({given[0]} was given)"
    return Gemma4Decision(Gemma4Action.USE_TRITON, reason, warn_explicit_trtllm=warn)


def override_hint() -> str:
    return (
        "pass --attention-backend trtllm_mha to override, or set "
        "SGLANG_NVFP4_PATCHES_DISABLE=gemma4-attention"
    )
