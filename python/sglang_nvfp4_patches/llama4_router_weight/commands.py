"""What each command calls of ``llama4-router-weight``: ``install`` (each part is probed and
patched when SGLang imports its module, :func:`sglang_nvfp4_patches.post_import.when_imported`:
the runner's fused functions, :func:`.runner_registry.runner_patcher`, and each rejecting method,
:func:`.method_lift.method_patcher`; ``--use-ray`` in :mod:`.ray_job_check`), ``doctor`` (what
SGLang holds now, or, where nothing is patched, whether each bug is live, both as
:func:`.rule.decide` has it) and ``explain``.
"""

from __future__ import annotations

import importlib

from sglang_nvfp4_patches.llama4_router_weight import evidence, outcomes
from sglang_nvfp4_patches.llama4_router_weight.method_lift import is_lifted, method_patcher
from sglang_nvfp4_patches.llama4_router_weight.rule import (
    CUTLASS,
    NAME,
    REJECTING_METHODS,
    RUNNER_MODULE,
    Answer,
    Part,
    RejectingMethod,
    decide,
)
from sglang_nvfp4_patches.llama4_router_weight.runner_registry import (
    registry_prescaled,
    runner_patcher,
)
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


def not_applicable() -> PatchReport:
    return PatchReport(
        NAME,
        PatchState.NOT_APPLICABLE,
        f"this SGLang has no FlashInfer CUTLASS MoE runner module ({RUNNER_MODULE})",
    )


def install(forced: bool, observe: bool) -> PatchReport:
    """Arrange for every part to be patched (``observe``: only probed) when SGLang imports its
    module. ``forced`` is never true: this patch cannot be forced."""
    from sglang_nvfp4_patches.llama4_router_weight import ray_job_check
    from sglang_nvfp4_patches.post_import import when_imported

    if not module_exists(RUNNER_MODULE):
        return not_applicable()
    when_imported(RUNNER_MODULE, runner_patcher(apply=not observe))
    for rejecting in REJECTING_METHODS:
        when_imported(rejecting.module, method_patcher(rejecting, apply=not observe))
    if not observe:
        ray_job_check.install()
    return summarize(observe)


def summarize(observe: bool) -> PatchReport:
    """One report from the parts, ranked as :func:`unpatched_report` ranks them (a
    process that imported SGLang before the plugin reports what one that imports it after does)."""
    parts = outcomes.recorded()
    states = {report.state for report in parts.values()}
    every = len(parts) == 1 + len(REJECTING_METHODS)
    failed = [
        f"{part.key}: {r.reason}" for part, r in parts.items() if r.state is PatchState.FAILED
    ]
    if failed:
        return PatchReport(NAME, PatchState.FAILED, "; ".join(failed))
    reason = "; ".join(report.reason for report in parts.values())
    if PatchState.NOT_PATCHED in states:
        return PatchReport(NAME, PatchState.NOT_PATCHED, reason)
    # unknown only once every part has answered: a part still to come may show its bug live
    if not parts or (PatchState.UNKNOWN in states and not every):
        action = "probed" if observe else "patched"
        return PatchReport(NAME, PatchState.PENDING, f"{action} when SGLang loads a MoE layer")
    if PatchState.UNKNOWN in states:
        reason = "; ".join(r.reason for r in parts.values() if r.state is PatchState.UNKNOWN)
        return PatchReport(NAME, PatchState.UNKNOWN, f"{reason}; run `{VERIFY_COMMAND}`")
    if states == {PatchState.ALREADY_UPSTREAM} and every:
        return PatchReport(NAME, PatchState.ALREADY_UPSTREAM, reason)
    return PatchReport(NAME, PatchState.APPLIED, reason)


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


def explain_note(moe_runner: str | None, moe_quantization: str | None) -> str:
    """One line for ``explain``'s Llama 4 rows, given the MoE runner the row ends on."""
    if moe_runner == CUTLASS:
        return (
            f"{NAME}: the CUTLASS runner pre-scales the top-1 router weight "
            "(apply_router_weight_on_input)"
        )
    return f"{NAME} acts only on the {CUTLASS} MoE runner"
