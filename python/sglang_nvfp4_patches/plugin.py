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

from sglang_nvfp4_patches.patch import Patch
from sglang_nvfp4_patches.patches import PATCHES
from sglang_nvfp4_patches.release_gate import VERIFY_COMMAND, ReleaseGate, release_gate
from sglang_nvfp4_patches.settings import (
    DISABLE_ENV,
    FORCE_ENV,
    UNTESTED_ENV,
    InvalidForceError,
    UnknownPatchNameError,
    disabled_patches,
    forced_patches,
)
from sglang_nvfp4_patches.status import PatchReport, PatchState, PatchUnavailable, sglang_version
from sglang_nvfp4_patches.supported_releases import NEWEST_TESTED, OLDEST_SUPPORTED

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


def _announce(gate: ReleaseGate) -> None:
    """One line per process where the release is untested: what the plugin does about it."""
    if gate.opt_in_error:
        logger.error("%s", gate.opt_in_error)
    if gate.tested:
        return
    if gate.opted_in:
        logger.warning(
            "sglang-nvfp4-patches was tested on SGLang %s to %s; SGLang %s is untested, and the "
            "patches are applied by feature because %s=apply is set. Run `%s` on this "
            "release before serving.",
            OLDEST_SUPPORTED,
            NEWEST_TESTED,
            gate.version,
            UNTESTED_ENV,
            VERIFY_COMMAND,
        )
        return
    logger.warning(
        "sglang-nvfp4-patches was tested on SGLang %s to %s; SGLang %s is untested, so nothing "
        "is patched. The probes still run, read-only, and each bug still live here is named "
        "as SGLang loads its code. Run `%s`, then set %s=apply to apply the patches.",
        OLDEST_SUPPORTED,
        NEWEST_TESTED,
        gate.version,
        VERIFY_COMMAND,
        UNTESTED_ENV,
    )


def _observe(patch: Patch, gate: ReleaseGate) -> PatchReport:
    """An untested release without the opt-in: the patch's probes only, read-only."""
    report = _install_one(patch.name, functools.partial(patch.install, observe=True))
    if report.state is PatchState.NOT_PATCHED and not report.reason.startswith("pending"):
        report = _with_the_reason(report, gate)
        logger.warning("[%s] live here: %s.", patch.name, report.reason)
    return report


def _with_the_reason(report: PatchReport, gate: ReleaseGate) -> PatchReport:
    """A live, unpatched finding, with why it is not patched and how to opt in."""
    if report.state is not PatchState.NOT_PATCHED:
        return report
    return PatchReport(report.name, report.state, f"{report.reason}; {gate.not_patched_because()}")


def install_all(version: str) -> dict[str, PatchReport]:
    """Install every patch that is not disabled and not already upstream; report each.
    On an untested release without the opt-in, only probe and say what is live."""
    gate = release_gate(version)
    _announce(gate)
    try:
        disabled = disabled_patches()
    except UnknownPatchNameError as error:
        logger.error("%s No patch is applied until %s is fixed.", error, DISABLE_ENV)
        return {
            patch.name: PatchReport(patch.name, PatchState.FAILED, f"invalid {DISABLE_ENV}")
            for patch in PATCHES
        }
    forced = forced_or_nothing() if gate.applies else frozenset()
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
        elif not gate.applies:
            reports[name] = _observe(patch, gate)
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


def _read_state(patch: Patch, read: Callable[[], PatchReport]) -> PatchReport:
    try:
        return read()
    except Exception as error:  # doctor reports, it never crashes on a broken release
        return PatchReport(patch.name, PatchState.FAILED, f"cannot read state: {error}")


def gated_state(patch: Patch, gate: ReleaseGate) -> PatchReport:
    """What ``doctor`` and ``explain`` say of a patch: its state read back from SGLang, said
    as the release gate makes it true (on an untested release without the opt-in, the
    probes read-only)."""
    if not gate.applies:  # nothing is patched: the probes, read-only
        return _with_the_reason(_read_state(patch, patch.unpatched), gate)
    report = _read_state(patch, patch.state)
    if gate.opted_in and report.state is PatchState.APPLIED:
        return PatchReport(report.name, report.state, f"{report.reason}; {gate.opt_in_note()}")
    return report


def reports() -> dict[str, PatchReport]:
    """What :func:`register` did in this process (empty if it never ran)."""
    return dict(_reports)
