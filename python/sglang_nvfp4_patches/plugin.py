"""Entry point SGLang calls through ``sglang.srt.plugins.load_plugins()``: installs each patch
of :data:`~sglang_nvfp4_patches.patches.PATCHES` that is not switched off, nothing else.

SGLang calls ``load_plugins()`` in several processes of one server (launcher, scheduler,
detokenizer, data-parallel controller), so :func:`register` runs once per process and is a
no-op on later calls. A patch that cannot be wired logs one ERROR and leaves SGLang as it was;
the server still starts.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable

from sglang_nvfp4_patches.patches import PATCHES
from sglang_nvfp4_patches.settings import (
    DISABLE_ENV,
    FORCE_ENV,
    InvalidForceError,
    UnknownPatchNameError,
    disabled_patches,
    forced_patches,
)
from sglang_nvfp4_patches.status import PatchReport, PatchState, PatchUnavailable, sglang_version
from sglang_nvfp4_patches.supported_releases import SUPPORTED_RANGE, is_supported

logger = logging.getLogger("sglang_nvfp4_patches")

_reports: dict[str, PatchReport] = {}


def _install_one(name: str, installer: Callable[[], PatchReport]) -> PatchReport:
    try:
        return installer()
    except PatchUnavailable as error:
        reason = str(error)
    except Exception as error:  # A broken patch must never stop the server.
        reason = f"{type(error).__name__}: {error}"
    logger.error(
        "[%s] could not be applied on SGLang %s: %s. SGLang is left unchanged for this patch.",
        name,
        sglang_version(),
        reason,
    )
    return PatchReport(name, PatchState.FAILED, reason)


def forced_or_nothing() -> frozenset[str]:
    """``SGLANG_NVFP4_PATCHES_FORCE``, or nothing forced (with one ERROR) when it is invalid."""
    try:
        return forced_patches()
    except InvalidForceError as error:
        logger.error("%s Fix or unset %s.", error, FORCE_ENV)
        return frozenset()


def install_all(version: str) -> dict[str, PatchReport]:
    """Install every patch that is not disabled and not already upstream; report each."""
    if not is_supported(version):
        logger.warning(
            "sglang-nvfp4-patches supports SGLang %s; SGLang %s is outside that range, so "
            "nothing is patched. Install a supported SGLang or a plugin release for yours.",
            SUPPORTED_RANGE,
            version,
        )
        # Nothing is installed; each patch only says whether upstream already has its fix.
        return {patch.name: patch.out_of_range() for patch in PATCHES}
    try:
        disabled = disabled_patches()
    except UnknownPatchNameError as error:
        logger.error("%s No patch is applied until %s is fixed.", error, DISABLE_ENV)
        return {
            patch.name: PatchReport(patch.name, PatchState.FAILED, f"invalid {DISABLE_ENV}")
            for patch in PATCHES
        }
    forced = forced_or_nothing()
    for name in sorted(forced & disabled):
        # Off wins over on: DISABLE is the switch that leaves SGLang exactly as it ships.
        logger.warning(
            "[%s] is named in both %s and %s; it stays disabled.", name, DISABLE_ENV, FORCE_ENV
        )
    reports: dict[str, PatchReport] = {}
    for patch in PATCHES:
        name = patch.name
        if name in disabled:
            reports[name] = PatchReport(name, PatchState.DISABLED, f"listed in {DISABLE_ENV}")
        elif name in forced:
            reports[name] = _install_one(name, functools.partial(patch.install, forced=True))
        else:
            reports[name] = _install_one(name, patch.install)
    return reports


def register() -> None:
    """Entry point: install once per process (SGLang may call its loader several times)."""
    if _reports:
        return
    version = sglang_version()
    _reports.update(install_all(version))
    logger.info(
        "sglang-nvfp4-patches on SGLang %s: %s",
        version,
        "; ".join(f"{r.name}: {r.state.value}" for r in _reports.values()),
    )


def reports() -> dict[str, PatchReport]:
    """What :func:`register` did in this process (empty if it never ran)."""
    return dict(_reports)
