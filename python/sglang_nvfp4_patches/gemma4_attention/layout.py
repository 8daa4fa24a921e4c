"""Which seam holds this SGLang's Gemma 4 attention default (:mod:`..override_seam` finds it
by feature), and the layout of the rule on it: a provider in a model-override registry
(:mod:`.registry_layout`), or a hook of ``ServerArgs._handle_model_specific_adjustments``
(:mod:`.method_layout`).
"""

from __future__ import annotations

from typing import Any

from sglang_nvfp4_patches.gemma4_attention.method_layout import MethodLayout
from sglang_nvfp4_patches.gemma4_attention.registry_layout import (
    RegistryLayout,
    overrides_module_provider,
    registry_provider,
)
from sglang_nvfp4_patches.override_seam import SeamKind, find_override_seam
from sglang_nvfp4_patches.status import PatchUnavailable

# The SM10X probe the rule reads where the seam hands it the record (the binding that
# release's Gemma 4 default reads).
SM100_PROBE = "is_sm100_supported"


def find_layout() -> Any:
    """Probe the installed SGLang for the layout that holds the Gemma 4 default."""
    seam = find_override_seam()
    if seam.kind is SeamKind.REGISTRY:
        return RegistryLayout(seam, registry_provider)
    if not hasattr(seam.module, SM100_PROBE):
        raise PatchUnavailable(f"{seam.module.__name__} has no {SM100_PROBE}")
    if seam.kind is SeamKind.OVERRIDES_REGISTRY:
        return RegistryLayout(seam, overrides_module_provider)
    return MethodLayout(seam)
