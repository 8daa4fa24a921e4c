"""Entry point SGLang calls through ``sglang.srt.plugins.load_plugins()``, in each process of a
server: installs, once per process, each patch that is not switched off, as this process's
decision (:func:`~sglang_nvfp4_patches.this_process.decision`) says. A patch that cannot be
wired logs one ERROR and leaves SGLang as it was.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable

from sglang_nvfp4_patches.patch_report import (
    PatchReport,
    PatchState,
    PatchUnavailable,
    log_not_applied,
)
from sglang_nvfp4_patches.patches import PATCHES
from sglang_nvfp4_patches.release_gate import VERIFY_COMMAND, ReleaseGate
from sglang_nvfp4_patches.settings import DISABLE_ENV, FORCE_ENV, UNTESTED_ENV
from sglang_nvfp4_patches.supported_releases import (
    NEWEST_TESTED,
    OLDEST_SUPPORTED,
    sglang_version,
    untested_phrase,
)
from sglang_nvfp4_patches.this_process import (
    ProcessDecision,
    decision,
    keep,
    reports,
    with_the_reason,
)

logger = logging.getLogger("sglang_nvfp4_patches")


def _install_one(name: str, installer: Callable[[], PatchReport]) -> PatchReport:
    try:
        return installer()
    except PatchUnavailable as error:
        reason = str(error)
    except Exception as error:  # A broken patch must never stop the server.
        reason = f"{type(error).__name__}: {error}"
    log_not_applied(logger, name, reason)
    return PatchReport(name, PatchState.FAILED, reason)


def _announce(gate: ReleaseGate) -> None:
    """One line per process where the version is untested: what the plugin does about it."""
    if gate.opt_in_error:
        logger.error("%s", gate.opt_in_error)
    if gate.same_sources_as:
        logger.info(
            "sglang-nvfp4-patches: %s, but %s: the patches apply as on %s.",
            untested_phrase(gate.version),
            gate.sources_note(),
            gate.same_sources_as,
        )
    if gate.tested:
        return
    what = (
        f"and the patches are applied by feature because {UNTESTED_ENV}=apply is set. Run "
        f"`{VERIFY_COMMAND}` on this release before serving."
        if gate.opted_in
        else "so nothing is patched. The probes still run, read-only, and each bug still live "
        f"here is named as SGLang loads its code. Run `{VERIFY_COMMAND}`, then set "
        f"{UNTESTED_ENV}=apply to apply the patches."
    )
    logger.warning(
        "sglang-nvfp4-patches was tested on SGLang %s to %s; SGLang %s is untested, %s",
        OLDEST_SUPPORTED,
        NEWEST_TESTED,
        gate.version,
        what,
    )


def install_all(decided: ProcessDecision) -> dict[str, PatchReport]:
    """Install every patch that is not disabled; report each (untested: only probe)."""
    gate = decided.gate
    _announce(gate)
    if decided.disable_error:
        logger.error(
            "%s No patch is applied until %s is fixed.", decided.disable_error, DISABLE_ENV
        )
        return {
            patch.name: PatchReport(patch.name, PatchState.FAILED, f"invalid {DISABLE_ENV}")
            for patch in PATCHES
        }
    if decided.force_error and gate.applies:
        logger.error("%s Fix or unset %s.", decided.force_error, FORCE_ENV)
    disabled, forced = decided.disabled, decided.forced
    for name in sorted(forced & disabled):
        # Off wins over on: DISABLE is the switch that leaves SGLang exactly as it ships.
        logger.warning(
            "[%s] is named in both %s and %s; it stays disabled.", name, DISABLE_ENV, FORCE_ENV
        )
    installed: dict[str, PatchReport] = {}
    for patch in PATCHES:
        name = patch.name
        if name in disabled:
            installed[name] = PatchReport(name, PatchState.DISABLED, f"listed in {DISABLE_ENV}")
            continue
        # An untested release without the opt-in: the patch's probes only, read-only.
        observe = not gate.applies
        install = functools.partial(patch.install, forced=name in forced, observe=observe)
        report = _install_one(name, install)
        if observe and report.state is PatchState.NOT_PATCHED:
            report = with_the_reason(report, gate)
            logger.warning("[%s] live here: %s.", name, report.reason)
        installed[name] = report
    return installed


def register() -> None:
    """Entry point: install once per process (SGLang may call its loader several times)."""
    if reports():
        return
    keep(install_all(decision()))
    logger.info(
        "sglang-nvfp4-patches on SGLang %s: %s",
        sglang_version(),
        "; ".join(f"{r.name}: {r.state.value}" for r in reports().values()),
    )
