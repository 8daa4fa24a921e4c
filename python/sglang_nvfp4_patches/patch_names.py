"""The patches' names, in the order they are installed and reported, and why each patch that
cannot be forced is not (pure, and a leaf: :mod:`.settings` reads it importing no patch)."""

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
