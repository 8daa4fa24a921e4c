"""The patches' names, in the order they are installed and reported, why each patch that
cannot be forced is not, and where each patch that decides from evidence records finds its
record (pure, and a leaf: :mod:`.settings` checks the environment against it, and the release
gate asks the records, without importing a patch package; each package's declaration takes its
name from here, :func:`.patch.declare` its forceability and record, and :mod:`.patches` its
order)."""

from __future__ import annotations

GEMMA4_ATTENTION = "gemma4-attention"
LLAMA4_ROUTER_WEIGHT = "llama4-router-weight"
NVFP4_MOE_RUNNER = "nvfp4-moe-runner"
PATCH_NAMES = (GEMMA4_ATTENTION, LLAMA4_ROUTER_WEIGHT, NVFP4_MOE_RUNNER)

# Why forcing it is refused, per patch that cannot be forced; every other patch can be.
NOT_FORCEABLE_BECAUSE: dict[str, str] = {
    LLAMA4_ROUTER_WEIGHT: (
        "where SGLang pre-scales the router weight itself, a forced pre-scale would apply it twice"
    ),
    NVFP4_MOE_RUNNER: (
        "it publishes a runner only where the evidence shows SGLang's own layer failing; pass "
        "--moe-runner-backend flashinfer_cutlass to choose that runner yourself"
    ),
}

# Per patch that decides from an evidence record (evidence_records.py): the module that gathers
# its evidence and finds its record for this SGLang (its ``current_record``).
EVIDENCE_MODULES: dict[str, str] = {
    LLAMA4_ROUTER_WEIGHT: "sglang_nvfp4_patches.llama4_router_weight.evidence",
    NVFP4_MOE_RUNNER: "sglang_nvfp4_patches.nvfp4_moe_runner.evidence",
}
