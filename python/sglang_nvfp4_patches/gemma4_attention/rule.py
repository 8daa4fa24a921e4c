"""The decision behind the ``gemma4-attention`` patch (pure: no SGLang, no torch).

SGLang defaults Gemma 4 to ``trtllm_mha`` on SM10X (12-18 % faster than ``triton``), which
collapsed the NVFP4 MoE checkpoint's accuracy with an FP8 KV cache (MMLU 0.622 vs 0.037 in one
report; sglang#26518): it dropped the V scale (``bmm2_scale = 1.0``) until sglang#28144. So
sglang#26791's rule (no backend given: ``triton``) applies only where that is live and the KV
cache is FP8, or where the operator forces it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from sglang_nvfp4_patches.models import GEMMA4_ARCHITECTURES

NVFP4_QUANTIZATION = "modelopt_fp4"
SAFE_BACKEND = "triton"
AFFECTED_BACKEND = "trtllm_mha"
SM10X_MAJOR = 10
ROOT_CAUSE_ISSUE = "sglang#26518"
ROOT_CAUSE_FIX = "sglang#28144"
V_SCALE_COLUMN = "gemma4:v-scale"  # the release facts' cell: a KvScaleHandoff's value
WAYS_OUT = "--attention-backend triton or --kv-cache-dtype bfloat16"
FIXED_NOTE = (
    f"{AFFECTED_BACKEND} applies FP8 KV-cache scales here ({ROOT_CAUSE_FIX}); "
    "SGLang's default stands"
)

NAME = "gemma4-attention"  # what users type (SGLANG_NVFP4_PATCHES_DISABLE) and doctor prints


class KvScaleHandoff(enum.Enum):
    APPLIED = "applied"  # every FP8-path bmm2_scale comes from the V scale: the bug is fixed
    DROPPED = "dropped"  # a constant reaches some FP8-path bmm2_scale: the bug is live
    UNKNOWN = "unknown"  # not measured on these sources (counted as live)


@dataclass(frozen=True)
class KvScaleVerdict:
    handoff: KvScaleHandoff
    evidence: str  # the release facts' row it is from, or why there is none

    @property
    def bug_live(self) -> bool:
        """Unknown counts as live: accuracy over speed where nobody measured."""
        return self.handoff is not KvScaleHandoff.APPLIED


class Gemma4Mode(enum.Enum):
    """Where the rule stands in this process (decided once, at plugin load)."""

    FIXED = "fixed"  # trtllm_mha applies the FP8 KV-cache scales: SGLang's default stands
    LIVE = "live"  # trtllm_mha drops them: #26791's rule, where the KV cache is FP8
    FORCED = "forced"  # SGLANG_NVFP4_PATCHES_FORCE: #26791's rule, whatever the code


@dataclass(frozen=True)
class Gemma4Facts:
    """What the rule needs to know, read off ServerArgs, the HF config and the GPU."""

    architecture: str | None
    quantization: str | None
    enable_moe_block: object  # the checkpoint may omit it, set null, or use 0/1: read by bool()
    compute_capability_major: int | None
    attention_backend: str | None = None
    prefill_attention_backend: str | None = None
    decode_attention_backend: str | None = None
    # None: could not be told; counted as FP8 (the checkpoint in question ships FP8 KV).
    kv_cache_fp8: bool | None = True


@dataclass(frozen=True)
class Gemma4Decision:
    attention_backend: str | None  # the one to declare (triton), or None: SGLang's own stands
    reason: str
    warning: str | None = None  # one WARNING to log (trtllm_mha given where the bug is live)


def kv_cache_is_fp8(kv_cache_dtype: str | None, checkpoint_kv_algo: object) -> bool:
    """Whether the KV cache will be FP8, as SGLang's ``configure_kv_cache_dtype`` decides:
    ``auto`` takes the checkpoint's ``kv_cache_quant_algo``, FP8 only when it says ``FP8``."""
    flag = (kv_cache_dtype or "auto").lower()
    if flag == "auto":
        return isinstance(checkpoint_kv_algo, str) and checkpoint_kv_algo.upper() == "FP8"
    return flag.startswith("fp8") or flag == "mxfp8"


def is_nvfp4_moe_on_sm10x(facts: Gemma4Facts) -> bool:
    """The one combination measured to lose accuracy on ``trtllm_mha``."""
    return (
        facts.architecture in GEMMA4_ARCHITECTURES
        and facts.quantization == NVFP4_QUANTIZATION
        and bool(facts.enable_moe_block)
        and facts.compute_capability_major == SM10X_MAJOR
    )


def why_triton(mode: Gemma4Mode) -> str:
    """Why the rule wants triton, in ``mode`` (for messages about a record it did not see)."""
    if mode is Gemma4Mode.FORCED:
        return "although SGLANG_NVFP4_PATCHES_FORCE=gemma4-attention asks for triton"
    return (
        f"which drops the FP8 KV-cache scales on this SGLang ({ROOT_CAUSE_ISSUE}; "
        f"fixed upstream in {ROOT_CAUSE_FIX})"
    )


def _rule_26791(facts: Gemma4Facts, mode: Gemma4Mode) -> Gemma4Decision:
    """#26791's rule as SGLang's own provider has it: with no backend, or one split side,
    given, ``attention_backend`` (the unset side's fallback) defaults; otherwise nothing."""
    sides = (facts.attention_backend, facts.prefill_attention_backend)
    given = [b for b in (*sides, facts.decode_attention_backend) if b is not None]
    warning = None
    if AFFECTED_BACKEND in given and mode is Gemma4Mode.FORCED:
        warning = (
            f"{AFFECTED_BACKEND} is honoured as given although "
            "SGLANG_NVFP4_PATCHES_FORCE=gemma4-attention asks for the triton default"
        )
    elif AFFECTED_BACKEND in given:
        warning = (
            f"{AFFECTED_BACKEND} is honoured as given, but this SGLang's {AFFECTED_BACKEND} "
            f"drops the FP8 KV-cache scales ({ROOT_CAUSE_ISSUE}; fixed upstream in "
            f"{ROOT_CAUSE_FIX}): Gemma 4 NVFP4 MoE loses accuracy with it (MMLU 0.622 -> "
            f"0.037 in one report). Use {WAYS_OUT}"
        )
    if facts.attention_backend is not None or len(given) == 2:
        explicit = "the attention backend was given explicitly (" + ", ".join(given) + ")"
        return Gemma4Decision(None, f"{explicit}; honoured", warning)
    if mode is Gemma4Mode.FORCED:
        reason = (
            "SGLANG_NVFP4_PATCHES_FORCE=gemma4-attention: Gemma 4 NVFP4 (modelopt_fp4) MoE on "
            "SM10X defaults the attention backend to triton"
        )
    else:
        reason = (
            f"this SGLang's {AFFECTED_BACKEND} drops the FP8 KV-cache scales "
            f"({ROOT_CAUSE_ISSUE}); Gemma 4 NVFP4 (modelopt_fp4) MoE on SM10X with an FP8 KV "
            "cache defaults the attention backend to triton"
        )
    if given:
        reason += f" for the split side that was not given ({given[0]} was given)"
    return Gemma4Decision(SAFE_BACKEND, reason, warning)


def decide_gemma4_attention(facts: Gemma4Facts, mode: Gemma4Mode) -> Gemma4Decision:
    """Decide the Gemma 4 attention default for one configuration in ``mode``."""
    if not is_nvfp4_moe_on_sm10x(facts):
        return Gemma4Decision(
            None, "not Gemma 4 NVFP4 MoE on SM10X; SGLang's default is unaffected"
        )
    if mode is Gemma4Mode.FIXED:
        return Gemma4Decision(None, FIXED_NOTE)
    if mode is Gemma4Mode.LIVE and facts.kv_cache_fp8 is False:
        return Gemma4Decision(
            None,
            f"the KV cache is not FP8, so {AFFECTED_BACKEND}'s dropped FP8 KV-cache scales do "
            "not apply; SGLang's default stands",
        )
    return _rule_26791(facts, mode)


def override_hint(mode: Gemma4Mode) -> str:
    if mode is Gemma4Mode.FORCED:
        return (
            "pass --attention-backend trtllm_mha to override, or unset SGLANG_NVFP4_PATCHES_FORCE"
        )
    return (
        "pass --attention-backend trtllm_mha to override (after checking accuracy), or set "
        "SGLANG_NVFP4_PATCHES_DISABLE=gemma4-attention"
    )
