"""Which seam holds this SGLang's Gemma 4 attention default, probed by feature.

In this order: the model-override registry (0.5.20+, :mod:`.registry_layout`), the
``arg_groups.overrides`` registry (0.5.15.post1-0.5.18, same module), and
``ServerArgs._handle_model_specific_adjustments`` (0.5.12-0.5.14, :mod:`.method_layout`).
"""

from __future__ import annotations

import importlib
from typing import Any

from sglang_nvfp4_patches.gemma4_attention.method_layout import (
    ADJUSTMENTS_METHOD,
    SERVER_ARGS_MODULE,
    MethodLayout,
)
from sglang_nvfp4_patches.gemma4_attention.registry_layout import (
    OVERRIDES_MODULE,
    RegistryLayout,
    overrides_module_provider,
    registry_provider,
)
from sglang_nvfp4_patches.status import PatchUnavailable


def find_layout() -> Any:
    """Probe the installed SGLang for the layout that holds the Gemma 4 default."""
    try:
        base = importlib.import_module("sglang.srt.arg_groups.model_override_base")
    except ImportError:
        base = None
    if base is not None:  # 0.5.20+: the registry must be complete, no fallback
        for name in ("register_model_override", "_MODEL_OVERRIDE_FNS"):
            if not hasattr(base, name):
                raise PatchUnavailable(f"{base.__name__} has no {name}")
        importlib.import_module("sglang.srt.arg_groups.model_overrides")  # SGLang's first
        return RegistryLayout("model-override registry", base, registry_provider)
    try:
        overrides = importlib.import_module(OVERRIDES_MODULE)
    except ImportError:
        overrides = None
    if overrides is not None and hasattr(overrides, "_MODEL_OVERRIDE_FNS"):
        for name in ("register_model_override", "is_sm100_supported"):
            if not hasattr(overrides, name):
                raise PatchUnavailable(f"{OVERRIDES_MODULE} has no {name}")
        return RegistryLayout("arg_groups.overrides registry", overrides, overrides_module_provider)
    server_args_module = importlib.import_module(SERVER_ARGS_MODULE)
    server_args_cls = getattr(server_args_module, "ServerArgs", None)
    if server_args_cls is not None and ADJUSTMENTS_METHOD in vars(server_args_cls):
        if not hasattr(server_args_module, "is_sm100_supported"):
            raise PatchUnavailable(f"{SERVER_ARGS_MODULE} has no is_sm100_supported")
        return MethodLayout(server_args_cls)
    raise PatchUnavailable(
        "found neither a model-override registry (sglang.srt.arg_groups.model_override_base "
        "or .overrides) nor ServerArgs._handle_model_specific_adjustments"
    )
