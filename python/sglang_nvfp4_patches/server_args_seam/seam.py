"""Where this SGLang lets a model declare its server-argument defaults, probed by feature, in
this order: the model-override registry of ``arg_groups.model_override_base`` (providers read
``resolving_view``; the last writer wins), the same registry in ``arg_groups.overrides``
(providers read the record), or ``ServerArgs._handle_model_specific_adjustments`` (hooked
AROUND). Which releases have which: ``docs/releases.md``.
"""

from __future__ import annotations

import enum
import importlib
from dataclasses import dataclass
from typing import Any

from sglang_nvfp4_patches.patch_report import PatchUnavailable

BASE_MODULE = "sglang.srt.arg_groups.model_override_base"
OVERRIDES_MODULE = "sglang.srt.arg_groups.overrides"
SERVER_ARGS_MODULE = "sglang.srt.server_args"
ADJUSTMENTS_METHOD = "_handle_model_specific_adjustments"
ADJUSTMENTS_TARGET = f"{SERVER_ARGS_MODULE}.ServerArgs.{ADJUSTMENTS_METHOD}"  # hooked AROUND


class SeamKind(enum.Enum):
    REGISTRY = "model-override registry"  # providers read the resolving view
    OVERRIDES_REGISTRY = "arg_groups.overrides registry"  # providers read the record
    ADJUSTMENTS_METHOD = "ServerArgs._handle_model_specific_adjustments"


@dataclass(frozen=True)
class OverrideSeam:
    kind: SeamKind
    module: Any  # the registry's module, or sglang.srt.server_args


def seam_module() -> str:
    """The module whose import completes the seam, found by its file alone (plugin load
    imports nothing: :func:`sglang_nvfp4_patches.post_import.when_imported`)."""
    from sglang_nvfp4_patches.post_import import module_exists

    if module_exists(BASE_MODULE):
        return "sglang.srt.arg_groups.model_overrides"
    if module_exists(OVERRIDES_MODULE):
        return OVERRIDES_MODULE
    return SERVER_ARGS_MODULE


def _import(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def find_override_seam() -> OverrideSeam:
    """The seam this SGLang has (:class:`PatchUnavailable`: none, or an incomplete registry)."""
    base = _import(BASE_MODULE)
    if base is not None:
        for name in ("register_model_override", "_MODEL_OVERRIDE_FNS"):
            if not hasattr(base, name):
                raise PatchUnavailable(f"{BASE_MODULE} has no {name}")
        importlib.import_module("sglang.srt.arg_groups.model_overrides")  # SGLang's first
        return OverrideSeam(SeamKind.REGISTRY, base)
    overrides = _import(OVERRIDES_MODULE)
    if overrides is not None and hasattr(overrides, "_MODEL_OVERRIDE_FNS"):
        if not hasattr(overrides, "register_model_override"):
            raise PatchUnavailable(f"{OVERRIDES_MODULE} has no register_model_override")
        return OverrideSeam(SeamKind.OVERRIDES_REGISTRY, overrides)
    server_args = importlib.import_module(SERVER_ARGS_MODULE)
    server_args_cls = getattr(server_args, "ServerArgs", None)
    if server_args_cls is not None and ADJUSTMENTS_METHOD in vars(server_args_cls):
        return OverrideSeam(SeamKind.ADJUSTMENTS_METHOD, server_args)
    raise PatchUnavailable(
        f"found neither a model-override registry ({BASE_MODULE} or {OVERRIDES_MODULE}) nor "
        f"ServerArgs.{ADJUSTMENTS_METHOD}"
    )
