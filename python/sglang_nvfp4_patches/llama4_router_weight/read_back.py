"""What ``doctor`` reads back of ``llama4-router-weight``: what SGLang holds now, or, where
nothing is patched, whether each bug is live (both as :func:`.rule.decide` has it)."""

from __future__ import annotations

import importlib

from sglang_nvfp4_patches.llama4_router_weight import evidence
from sglang_nvfp4_patches.llama4_router_weight.install import not_applicable
from sglang_nvfp4_patches.llama4_router_weight.method_lift import is_lifted
from sglang_nvfp4_patches.llama4_router_weight.rule import (
    NAME,
    REJECTING_METHODS,
    RUNNER_MODULE,
    Answer,
    Part,
    RejectingMethod,
    decide,
)
from sglang_nvfp4_patches.llama4_router_weight.runner_registry import registry_prescaled
from sglang_nvfp4_patches.patch_report import PatchReport, PatchState, PatchUnavailable
from sglang_nvfp4_patches.post_import import module_exists
from sglang_nvfp4_patches.release_gate import VERIFY_COMMAND

RUNNER_PATCHED = (
    "patched (the top-1 pre-scale is ours, and it hands SGLang's fused function a config "
    "without the flag: the weight is applied once, also where SGLang pre-scales under a name "
    "this plugin does not know)"
)
RUN_VERIFY = f"run `{VERIFY_COMMAND}`"
NOT_HONOURED = "its CUTLASS fused functions still reject apply_router_weight_on_input"
Note = tuple[str, PatchState | None, str | None]  # doctor's note, and a problem with its state


def _method_note(rejecting: RejectingMethod, answer: Answer, runner_honours: bool) -> Note:
    """Doctor's note on one method; a hook lifts nothing where the runner does not honour the
    flag."""
    label = f"{rejecting.label} rejection"
    lifted = is_lifted(rejecting)
    if answer.state is PatchState.ALREADY_UPSTREAM:
        return f"{label}: {answer.note}", None, None
    if answer.state is PatchState.FAILED:
        return f"{label}: not lifted", PatchState.FAILED, answer.reason
    if answer.state is PatchState.UNKNOWN and runner_honours:
        how = " (lifted, which is safe where it does not reject)" if lifted else ""
        return f"{label}: cannot tell{how}", PatchState.UNKNOWN, answer.reason
    if lifted and runner_honours:
        return f"{label}: {answer.note}", None, None
    problem = answer.unpatched[1]
    if lifted:
        problem += " (not lifted: the runner does not honour the flag)"
    return f"{label}: not lifted", PatchState.FAILED, problem


def _problems(found: list[tuple[PatchState | None, str | None]], state: PatchState) -> list[str]:
    return [problem for has, problem in found if has is state and problem]


def _cannot_inspect() -> PatchReport | None:
    """Why there is nothing to read here (``None``: the runner module imports)."""
    if not module_exists(RUNNER_MODULE):
        return not_applicable()
    try:
        importlib.import_module(RUNNER_MODULE)
    except (ImportError, AttributeError, PatchUnavailable) as error:
        return PatchReport(NAME, PatchState.FAILED, f"cannot inspect: {error}")
    return None


def current_state() -> PatchReport:
    """What the installed SGLang holds now: imports the modules and looks at the objects."""
    from sglang_nvfp4_patches.llama4_router_weight import ray_job_check

    if (report := _cannot_inspect()) is not None:
        return report
    facts = evidence.current_facts()
    runner = decide(facts, Part.RUNNER)
    honours = not runner.act or registry_prescaled()
    notes = [_method_note(m, decide(facts, m.part), honours) for m in REJECTING_METHODS]
    found = [(state, problem) for _, state, problem in notes]
    failed = _problems(found, PatchState.FAILED)
    if not honours:
        failed.insert(0, f"runner: {NOT_HONOURED}")
    if failed:
        return PatchReport(NAME, PatchState.FAILED, "; ".join(failed))
    runner_note = f"{RUNNER_PATCHED}: {runner.note}" if runner.act else "upstream"
    said = [f"runner pre-scale: {runner_note}", *(note for note, _, _ in notes)]
    if unknown := _problems(found, PatchState.UNKNOWN):
        return PatchReport(NAME, PatchState.UNKNOWN, "; ".join([*unknown, RUN_VERIFY, *said]))
    if ray_note := ray_job_check.doctor_note():
        said.append(ray_note)
    upstream = not runner.act and all(
        state is None and "none in this release" in n for n, state, _ in notes
    )
    return PatchReport(
        NAME, PatchState.ALREADY_UPSTREAM if upstream else PatchState.APPLIED, "; ".join(said)
    )


def unpatched_report() -> PatchReport:
    """Where nothing is patched: which bugs are live here."""
    if (report := _cannot_inspect()) is not None:
        return report
    facts = evidence.current_facts()
    found = [decide(facts, part).unpatched for part in Part]
    live = [
        reason for state, reason in found if state in (PatchState.NOT_PATCHED, PatchState.FAILED)
    ]
    unknown = _problems(list(found), PatchState.UNKNOWN)
    if live:
        return PatchReport(NAME, PatchState.NOT_PATCHED, "live here: " + "; ".join(live + unknown))
    if unknown:
        return PatchReport(NAME, PatchState.UNKNOWN, "; ".join([*unknown, RUN_VERIFY]))
    notes = [f"{m.label} rejection: {decide(facts, m.part).note}" for m in REJECTING_METHODS]
    return PatchReport(
        NAME, PatchState.ALREADY_UPSTREAM, "; ".join(["runner pre-scale: upstream", *notes])
    )
