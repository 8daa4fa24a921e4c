"""What ``explain`` says on a Gemma 4 row: the root-cause verdict and what it means here."""

from __future__ import annotations

from sglang_nvfp4_patches.gemma4_attention.rule import FIXED_NOTE, Gemma4Mode
from sglang_nvfp4_patches.gemma4_attention.rule_state import (
    current_mode,
    kv_scale_verdict,
    verdict_phrase,
)


def explain_note(moe_runner: str | None = None, moe_quantization: str | None = None) -> str:
    """One line for ``explain``'s Gemma 4 rows (the MoE runner does not matter to it)."""
    verdict = kv_scale_verdict()
    if current_mode() is Gemma4Mode.FORCED:
        return (
            "SGLANG_NVFP4_PATCHES_FORCE=gemma4-attention applies the triton rule (the "
            f"root-cause probe says {verdict.handoff.value} here)"
        )
    if not verdict.bug_live:
        return FIXED_NOTE
    return (
        f"{verdict_phrase(verdict)}; Gemma 4 NVFP4 MoE with an FP8 KV cache on SM10X gets "
        "triton unless a backend is given"
    )
