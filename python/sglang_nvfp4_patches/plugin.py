"""Entry point SGLang calls through ``sglang.srt.plugins.load_plugins()``.

SGLang calls ``load_plugins()`` in several processes of one server (launcher, scheduler,
detokenizer, data-parallel controller), so :func:`register` runs once per process and is a
no-op on later calls. A patch that cannot be wired logs one ERROR and leaves SGLang as it was;
the server still starts.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable

from sglang_nvfp4_patches import (
    flashinfer_cutlass_runner,
    server_args_gemma4_default,
)
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

INSTALLERS: dict[str, Callable[..., PatchReport]] = {
    server_args_gemma4_default.PATCH_NAME: server_args_gemma4_default.install,
    flashinfer_cutlass_runner.PATCH_NAME: flashinfer_cutlass_runner.install,
}

# On a release outside the supported range nothing is installed; each patch only says
# whether upstream already has its fix.
OUT_OF_RANGE_REPORTS: dict[str, Callable[[], PatchReport]] = {
    server_args_gemma4_default.PATCH_NAME: server_args_gemma4_default.out_of_range_report,
    flashinfer_cutlass_runner.PATCH_NAME: flashinfer_cutlass_runner.out_of_range_report,
}

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
        return {name: report() for name, report in OUT_OF_RANGE_REPORTS.items()}
    try:
        disabled = disabled_patches()
    except UnknownPatchNameError as error:
        logger.error("%s No patch is applied until %s is fixed.", error, DISABLE_ENV)
        return {
            name: PatchReport(name, PatchState.FAILED, f"invalid {DISABLE_ENV}")
            for name in INSTALLERS
        }
    forced = forced_or_nothing()
    for name in sorted(forced & disabled):
        # Off wins over on: DISABLE is the switch that leaves SGLang exactly as it ships.
        logger.warning(
            "[%s] is named in both %s and %s; it stays disabled.", name, DISABLE_ENV, FORCE_ENV
        )
    reports: dict[str, PatchReport] = {}
    for name, installer in INSTALLERS.items():
        if name in disabled:
            reports[name] = PatchReport(name, PatchState.DISABLED, f"listed in {DISABLE_ENV}")
        elif name in forced:
            reports[name] = _install_one(name, functools.partial(installer, forced=True))
        else:
            reports[name] = _install_one(name, installer)
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
