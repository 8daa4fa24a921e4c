"""The patches this plugin has, in :mod:`.patch_names`' order (pure)."""

from __future__ import annotations

from sglang_nvfp4_patches import gemma4_attention, llama4_router_weight, nvfp4_moe_runner
from sglang_nvfp4_patches.patch import Patch
from sglang_nvfp4_patches.patch_names import PATCH_NAMES

_DECLARED = {
    patch.name: patch
    for patch in (gemma4_attention.PATCH, llama4_router_weight.PATCH, nvfp4_moe_runner.PATCH)
}
PATCHES: tuple[Patch, ...] = tuple(_DECLARED[name] for name in PATCH_NAMES)
