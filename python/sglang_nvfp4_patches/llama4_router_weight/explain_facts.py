"""What ``explain`` says on a Llama 4 row about ``llama4-router-weight``."""

from __future__ import annotations

from sglang_nvfp4_patches.llama4_router_weight.rule import CUTLASS, NAME


def explain_note(moe_runner: str | None, moe_quantization: str | None) -> str:
    """One line for ``explain``'s Llama 4 rows, given the MoE runner the row ends on."""
    if moe_runner == CUTLASS:
        return (
            f"{NAME}: the CUTLASS runner pre-scales the top-1 router weight "
            "(apply_router_weight_on_input)"
        )
    return f"{NAME} acts only on the {CUTLASS} MoE runner"
