"""What ``doctor`` reads back of ``llama4-router-weight``: what SGLang holds now, or, where
nothing is patched, whether the bug is live (both as :func:`.rule.decide` has it)."""

from __future__ import annotations

import dataclasses
import importlib

from sglang_nvfp4_patches.llama4_router_weight import NAME, evidence
from sglang_nvfp4_patches.llama4_router_weight.install import not_applicable
from sglang_nvfp4_patches.llama4_router_weight.method_lift import is_lifted, still_rejects
from sglang_nvfp4_patches.llama4_router_weight.rule import (
    REJECTING_METHODS,
    RUNNER_MODULE,
    Answer,
    Part,
    RejectingMethod,
    decide,
)
from sglang_nvfp4_patches.llama4_router_weight.runner_registry import (
    no_prescale_of_its_own,
    registry_prescaled,
    runner_cannot_tell,
)
from sglang_nvfp4_patches.post_import import module_exists
from sglang_nvfp4_patches.release_gate import VERIFY_COMMAND
from sglang_nvfp4_patches.status import PatchReport, PatchState, PatchUnavailable

RUNNER_PATCHED = (
    "patched (the top-1 pre-scale is ours, and it hands SGLang's fused function a config "
    "without the flag: the weight is applied once, also where SGLang pre-scales under a name "
    "this plugin does not know)"
)
RUN_VERIFY = f"run `{VERIFY_COMMAND}`"
NOT_HONOURED = "its CUTLASS fused functions still reject apply_router_weight_on_input"


@dataclasses.dataclass(frozen=True)
class MethodNote:
    """Doctor's note on one rejecting method, and ``problem`` with its ``state``, if any."""

    note: str
    problem: str | None = None
    state: PatchState | None = None


def _method_note(rejecting: RejectingMethod, answer: Answer, runner_honours: bool) -> MethodNote:
    """Doctor's note on one method; a hook lifts nothing where the runner does not honour the
    flag."""
    label = f"{rejecting.label} rejection"
    if answer.state is PatchState.ALREADY_UPSTREAM:
        return MethodNote(f"{label}: {answer.note}")
    if answer.state is PatchState.UNKNOWN:
        how = " (lifted, which is safe where it does not reject)" if is_lifted(rejecting) else ""
        return MethodNote(f"{label}: cannot tell{how}", answer.reason, PatchState.UNKNOWN)
    if answer.state is PatchState.FAILED:
        return MethodNote(f"{label}: not lifted", answer.reason, PatchState.FAILED)
    if is_lifted(rejecting) and runner_honours:
        return MethodNote(f"{label}: {answer.note}")
    problem = still_rejects(rejecting)
    if is_lifted(rejecting):
        problem += " (not lifted: the runner does not honour the flag)"
    return MethodNote(f"{label}: not lifted", problem, PatchState.FAILED)


def _problems(notes: list[MethodNote], state: PatchState) -> list[str]:
    """What is wrong at each method whose note has ``state``."""
    return [note.problem for note in notes if note.state is state and note.problem]


@dataclasses.dataclass(frozen=True)
class Inspected:
    runner: Answer
    recorded: bool  # this SGLang has a row of facts
    runner_trouble: str | None  # why the runner does not honour the flag (``None``: it does)
    methods: list[MethodNote]


def _inspected() -> Inspected | PatchReport:
    """What the runner and each method get here; or the report that says why there is nothing
    to read."""
    if not module_exists(RUNNER_MODULE):
        return not_applicable()
    try:
        importlib.import_module(RUNNER_MODULE)
        facts = evidence.current_facts()
        runner = decide(facts, Part.RUNNER)
        trouble = None if not runner.act or registry_prescaled() else NOT_HONOURED
        notes = [
            _method_note(rejecting, decide(facts, rejecting.part), trouble is None)
            for rejecting in REJECTING_METHODS
        ]
        return Inspected(runner, facts is not None, trouble, notes)
    except (ImportError, AttributeError, PatchUnavailable) as error:
        return PatchReport(NAME, PatchState.FAILED, f"cannot inspect: {error}")


def current_state() -> PatchReport:
    """What the installed SGLang holds now: imports the modules and looks at the objects."""
    from sglang_nvfp4_patches.llama4_router_weight import ray_job_check

    found = _inspected()
    if isinstance(found, PatchReport):
        return found
    failed = _problems(found.methods, PatchState.FAILED)
    if found.runner_trouble is not None:
        failed.insert(0, f"runner: {found.runner_trouble}")
    if failed:
        return PatchReport(NAME, PatchState.FAILED, "; ".join(failed))
    runner_note = f"{RUNNER_PATCHED}: {found.runner.note}" if found.runner.act else "upstream"
    notes = [f"runner pre-scale: {runner_note}", *(m.note for m in found.methods)]
    unknown = _problems(found.methods, PatchState.UNKNOWN)
    if unknown:
        return PatchReport(NAME, PatchState.UNKNOWN, "; ".join([*unknown, RUN_VERIFY, *notes]))
    if ray_note := ray_job_check.doctor_note():
        notes.append(ray_note)
    upstream = not found.runner.act and all(
        not m.problem and "none in this release" in m.note for m in found.methods
    )
    state = PatchState.ALREADY_UPSTREAM if upstream else PatchState.APPLIED
    return PatchReport(NAME, state, "; ".join(notes))


def unpatched_report() -> PatchReport:
    """Where nothing is patched: which bugs are live here."""
    found = _inspected()
    if isinstance(found, PatchReport):
        return found
    live = _problems(found.methods, PatchState.FAILED)
    unknown = _problems(found.methods, PatchState.UNKNOWN)
    if found.runner.act and not found.recorded:
        unknown.insert(0, runner_cannot_tell(found.runner.note))
    elif found.runner.act:
        live.insert(0, no_prescale_of_its_own(found.runner.note))
    if live:
        return PatchReport(NAME, PatchState.NOT_PATCHED, "live here: " + "; ".join(live + unknown))
    if unknown:
        return PatchReport(NAME, PatchState.UNKNOWN, "; ".join([*unknown, RUN_VERIFY]))
    notes = ["runner pre-scale: upstream", *(m.note for m in found.methods)]
    return PatchReport(NAME, PatchState.ALREADY_UPSTREAM, "; ".join(notes))
