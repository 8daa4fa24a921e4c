"""Environment settings of the plugin (pure: no SGLang import)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from sglang_nvfp4_patches import PATCH_NAMES

DISABLE_ENV = "SGLANG_NVFP4_PATCHES_DISABLE"


class UnknownPatchNameError(ValueError):
    """``SGLANG_NVFP4_PATCHES_DISABLE`` names a patch this plugin does not have."""


def disabled_patches(environ: Mapping[str, str] | None = None) -> frozenset[str]:
    """Patch names switched off by ``SGLANG_NVFP4_PATCHES_DISABLE`` (comma-separated).

    An unknown name is an error rather than a silent no-op: a typo would otherwise leave
    the patch on while the operator believes it is off.
    """
    raw = (os.environ if environ is None else environ).get(DISABLE_ENV, "")
    names = {part.strip() for part in raw.split(",") if part.strip()}
    unknown = sorted(names - set(PATCH_NAMES))
    if unknown:
        raise UnknownPatchNameError(
            f"{DISABLE_ENV}={raw!r} names unknown patch(es) {', '.join(unknown)}; "
            f"known patches are {', '.join(PATCH_NAMES)} (comma-separated)."
        )
    return frozenset(names)
