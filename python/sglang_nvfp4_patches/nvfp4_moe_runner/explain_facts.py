"""What ``explain`` says on a ModelOpt NVFP4 MoE row about ``nvfp4-moe-runner``."""

from __future__ import annotations

from sglang_nvfp4_patches.nvfp4_moe_runner.rule import CUTLASS, NAME, NVFP4


def explain_note(moe_runner: str | None, moe_quantization: str | None) -> str:
    """One line for a ModelOpt NVFP4 MoE row (none for any other checkpoint)."""
    if moe_quantization != NVFP4:
        return ""
    from sglang_nvfp4_patches.nvfp4_moe_runner.evidence import facts_of
    from sglang_nvfp4_patches.nvfp4_moe_runner.read_back import no_record
    from sglang_nvfp4_patches.release_facts import current_row

    row = current_row()
    if row is None or facts_of(row) is None:
        return f"{NAME} cannot tell here ({no_record().reason})"
    return (
        f"{NAME}: a ModelOpt NVFP4 MoE checkpoint launched with no MoE runner gets {CUTLASS} "
        f"where SGLang's own layer fails at the first forward (evidence recorded by "
        f"{row.made_by})"
    )
