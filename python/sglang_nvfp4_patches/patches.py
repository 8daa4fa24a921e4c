"""The patches this plugin has, in the order they are installed and reported (pure)."""

from __future__ import annotations

from sglang_nvfp4_patches import gemma4_attention, llama4_router_weight, nvfp4_moe_runner
from sglang_nvfp4_patches.patch import Patch

PATCHES: tuple[Patch, ...] = (
    gemma4_attention.PATCH,
    llama4_router_weight.PATCH,
    nvfp4_moe_runner.PATCH,
)
