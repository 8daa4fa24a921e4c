"""What ``doctor`` reads back of ``llama4-router-weight``: what SGLang holds now, or the
probes read-only where nothing is patched."""

from __future__ import annotations

import dataclasses
import importlib

from sglang_nvfp4_patches.llama4_router_weight.install import not_applicable
from sglang_nvfp4_patches.llama4_router_weight.method_lift import (
    NO_REJECTION,
    decision_for,
    is_lifted,
    reading_of,
    still_rejects,
)
from sglang_nvfp4_patches.llama4_router_weight.rejecting_methods import (
    REJECTING_METHODS,
    RejectingMethod,
)
from sglang_nvfp4_patches.llama4_router_weight.rule import NAME
from sglang_nvfp4_patches.llama4_router_weight.runner_registry import (
    RUNNER_MODULE,
    no_prescale_of_its_own,
    runner_cannot_tell,
    runner_not_recorded,
    runner_problem,
    upstream_prescale_problem,
)
from sglang_nvfp4_patches.post_import import module_exists
from sglang_nvfp4_patches.status import PatchReport, PatchState, PatchUnavailable

RUNNER_PATCHED = (
    "patched (the top-1 pre-scale is ours, and it hands SGLang's fused function a config "
    "without the flag: the weight is applied once, also where SGLang pre-scales under a name "
    "this plugin does not know)"
)


@dataclasses.dataclass(frozen=True)
class MethodNote:
    """Doctor's note on one rejecting method, and ``problem`` with its ``state``, if any."""

    note: str
    problem: str | None = None
    state: PatchState | None = None


def _method_note(rejecting: RejectingMethod, runner_honours: bool) -> MethodNote:
    """Doctor's note on one method, as the server decides it (:func:`.method_lift.decide`); a
    hook lifts nothing where the runner does not honour the flag."""
    method_cls = getattr(importlib.import_module(rejecting.module), rejecting.cls)
    decision = decision_for(rejecting, method_cls)
    label = f"{rejecting.label} rejection"
    if decision.state is PatchState.ALREADY_UPSTREAM:
        return MethodNote(f"{label}: {decision.note}")
    if decision.state is PatchState.UNKNOWN:
        how = " (lifted, which is safe where it does not reject)" if is_lifted(rejecting) else ""
        return MethodNote(f"{label}: cannot tell{how}", decision.reason, PatchState.UNKNOWN)
    if decision.state is PatchState.FAILED:
        return MethodNote(f"{label}: not lifted", decision.reason, PatchState.FAILED)
    if is_lifted(rejecting) and runner_honours:
        return MethodNote(f"{label}: {decision.note}")
    problem = still_rejects(rejecting, reading_of(rejecting, method_cls))
    if is_lifted(rejecting):
        problem += " (not lifted: the runner does not honour the flag)"
    return MethodNote(f"{label}: not lifted", problem, PatchState.FAILED)


def _problems(notes: list[MethodNote], state: PatchState) -> list[str]:
    """What is wrong at each method whose note has ``state``."""
    return [note.problem for note in notes if note.state is state and note.problem]


def _inspected() -> tuple[str | None, str | None, list[MethodNote]] | PatchReport:
    """Why the runner has no working pre-scale of its own (``None``: it has), why it does not
    honour the flag (``None``: it does), and each method's note; or the report that says why
    there is nothing to read."""
    if not module_exists(RUNNER_MODULE):
        return not_applicable()
    try:
        importlib.import_module(RUNNER_MODULE)
        problem = runner_problem()
        notes = [_method_note(rejecting, problem is None) for rejecting in REJECTING_METHODS]
        return upstream_prescale_problem(), problem, notes
    except (ImportError, AttributeError, PatchUnavailable) as error:
        return PatchReport(NAME, PatchState.FAILED, f"cannot inspect: {error}")


def current_state() -> PatchReport:
    """What the installed SGLang holds now: imports the modules and looks at the objects."""
    from sglang_nvfp4_patches.llama4_router_weight import ray_job_check

    parts = _inspected()
    if isinstance(parts, PatchReport):
        return parts
    no_prescale, runner_trouble, method_notes = parts
    failed = _problems(method_notes, PatchState.FAILED)
    if runner_trouble is not None:
        failed.insert(0, f"runner: {runner_trouble}")
    if failed:
        return PatchReport(NAME, PatchState.FAILED, "; ".join(failed))
    runner_note = "upstream" if no_prescale is None else f"{RUNNER_PATCHED}: {no_prescale}"
    notes = [f"runner pre-scale: {runner_note}", *(m.note for m in method_notes)]
    unknown = _problems(method_notes, PatchState.UNKNOWN)
    if unknown:
        return PatchReport(NAME, PatchState.UNKNOWN, "; ".join(unknown + notes))
    nothing_to_patch = no_prescale is None and all(NO_REJECTION in m.note for m in method_notes)
    if ray_note := ray_job_check.doctor_note():
        notes.append(ray_note)
    state = PatchState.ALREADY_UPSTREAM if nothing_to_patch else PatchState.APPLIED
    return PatchReport(NAME, state, "; ".join(notes))


def unpatched_report() -> PatchReport:
    """The probes, read-only, where nothing is patched: which rejections are live here."""
    parts = _inspected()
    if isinstance(parts, PatchReport):
        return parts
    no_prescale, _, method_notes = parts
    live = _problems(method_notes, PatchState.FAILED)
    unknown = _problems(method_notes, PatchState.UNKNOWN)
    if no_prescale is not None and runner_not_recorded():
        unknown.insert(0, runner_cannot_tell(no_prescale))
    elif no_prescale is not None:
        live.insert(0, no_prescale_of_its_own(no_prescale))
    if live:
        return PatchReport(NAME, PatchState.NOT_PATCHED, "live here: " + "; ".join(live + unknown))
    if unknown:
        return PatchReport(NAME, PatchState.UNKNOWN, "; ".join(unknown))
    notes = ["runner pre-scale: upstream", *(m.note for m in method_notes)]
    return PatchReport(NAME, PatchState.ALREADY_UPSTREAM, "; ".join(notes))
