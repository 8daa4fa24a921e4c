"""What this process decided when the plugin loaded, and what each patch's install said
(pure: no SGLang, no torch at import). The release gate, DISABLE and FORCE are read once
(:func:`decision`); the commands read this record and decide nothing again.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from sglang_nvfp4_patches.interrupts import caused_by_interrupt
from sglang_nvfp4_patches.patch import Patch
from sglang_nvfp4_patches.patch_report import PatchReport, PatchState
from sglang_nvfp4_patches.release_gate import ReleaseGate, this_gate
from sglang_nvfp4_patches.settings import (
    InvalidForceError,
    UnknownPatchNameError,
    disabled_patches,
    forced_patches,
)
from sglang_nvfp4_patches.sglang_hooks import PLUGIN_ENTRY_POINT


@dataclass(frozen=True)
class ProcessDecision:
    """What the environment and the release decide for this process, read once."""

    gate: ReleaseGate
    disabled: frozenset[str]
    # An invalid SGLANG_NVFP4_PATCHES_DISABLE, explained: then no patch is applied.
    disable_error: str
    # What FORCE forces here: nothing where the gate keeps the patches off, or it is invalid.
    forced: frozenset[str]
    force_error: str  # an invalid SGLANG_NVFP4_PATCHES_FORCE, explained


@functools.cache
def decision() -> ProcessDecision:
    """The one reading of the release gate, DISABLE and FORCE in this process."""
    from sglang_nvfp4_patches.patches import PATCHES

    gate = this_gate()
    try:
        disabled, disable_error = disabled_patches(PATCHES), ""
    except UnknownPatchNameError as error:
        disabled, disable_error = frozenset(), str(error)
    try:
        forced, force_error = forced_patches(PATCHES), ""
    except InvalidForceError as error:
        forced, force_error = frozenset(), str(error)
    return ProcessDecision(
        gate, disabled, disable_error, forced if gate.applies else frozenset(), force_error
    )


_reports: dict[str, PatchReport] = {}


def keep(reports: Mapping[str, PatchReport]) -> None:
    """What ``register()`` did, kept for the rest of the process."""
    _reports.update(reports)


def reports() -> dict[str, PatchReport]:
    """What ``register()`` did in this process (empty if it never ran)."""
    return dict(_reports)


# SGLang's whitelist of general plugins: when set, an entry point it does not name is skipped.
PLUGINS_ENV = "SGLANG_PLUGINS"


def not_loaded_reason() -> str:
    """Why SGLang did not load the plugin in this process (no report was kept)."""
    value = os.environ.get(PLUGINS_ENV)
    if value is None:
        return "SGLang did not load the plugin (is it installed in this Python environment?)"
    return (
        f"SGLang did not load the plugin: {PLUGINS_ENV}={value!r} does not name "
        f"{PLUGIN_ENTRY_POINT} (add it there)"
    )


def not_loaded(patch: Patch) -> PatchReport:
    """What ``doctor`` says of a patch SGLang did not load: its probes, read-only, with why
    nothing is patched; ``disabled`` where nothing it fixes is live here."""
    found = _read(patch, patch.unpatched)
    if found.state in (PatchState.NOT_PATCHED, PatchState.UNKNOWN):
        return PatchReport(patch.name, found.state, f"{found.reason}; {not_loaded_reason()}")
    return PatchReport(
        patch.name,
        PatchState.DISABLED,
        f"{not_loaded_reason()}; nothing it fixes is live here ({found.state.value})",
    )


def with_the_reason(report: PatchReport, gate: ReleaseGate) -> PatchReport:
    """A live, unpatched finding, with why it is not patched and how to opt in."""
    if report.state is not PatchState.NOT_PATCHED:
        return report
    return PatchReport(report.name, report.state, f"{report.reason}; {gate.not_patched_because()}")


def _read(patch: Patch, read: Callable[[], PatchReport]) -> PatchReport:
    try:
        return read()
    except Exception as error:  # doctor reports, it never crashes on a broken release
        if caused_by_interrupt(error):  # a stop Python wrapped (``__set_name__``): a stop
            raise KeyboardInterrupt from error
        return PatchReport(patch.name, PatchState.FAILED, f"cannot read state: {error}")


def read_back(patch: Patch) -> PatchReport:
    """What ``doctor`` and ``explain`` say of a patch: its state read back, as this process's
    release gate makes it true."""
    gate = decision().gate
    if not gate.applies:  # nothing is patched: the probes, read-only
        return with_the_reason(_read(patch, patch.unpatched), gate)
    report = _read(patch, patch.state)
    if gate.opted_in and report.state is PatchState.APPLIED:
        return PatchReport(report.name, report.state, f"{report.reason}; {gate.opt_in_note()}")
    return report
