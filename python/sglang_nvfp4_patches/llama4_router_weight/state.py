"""Install ``llama4-router-weight``'s parts when SGLang imports their modules, and read back
what SGLang holds.

Three places reject the flag on this path, each probed and patched on its own when SGLang
imports the module that holds it (:mod:`sglang_nvfp4_patches.post_import`): the runner's
fused functions (:mod:`.runner_registry`; upstream from 0.5.21), and
``ModelOptNvFp4FusedMoEMethod`` and ``CompressedTensorsW4A4Nvfp4MoE`` (:mod:`.method_lift`;
still rejecting in 0.5.23). Under ``--use-ray`` the actors need the Ray job to load plugins
(:mod:`.ray_scheduler_actors`).
"""

from __future__ import annotations

import importlib
from pathlib import Path

from sglang_nvfp4_patches.llama4_router_weight import NAME, outcomes
from sglang_nvfp4_patches.llama4_router_weight.method_lift import (
    METHOD_HALVES,
    MethodHalf,
    is_lifted,
    method_patcher,
    rejects_router_weight_on_input,
)
from sglang_nvfp4_patches.llama4_router_weight.runner_registry import (
    CUTLASS_FUSED_FUNC_KEYS,
    RUNNER_MODULE,
    UPSTREAM_PRESCALE,
    fused_func_registry,
    is_patched,
    patch_runner_module,
)
from sglang_nvfp4_patches.status import (
    PatchReport,
    PatchState,
    PatchUnavailable,
    outside_supported_range,
)

CUTLASS_RUNNER = "flashinfer_cutlass"  # the MoE runner backend this patch acts on


def module_exists(name: str) -> bool:
    """Look for the module's file without importing its parent packages (seconds of torch
    and kernel imports in a launcher that never builds a MoE layer)."""
    import sglang

    relative = Path(*name.split(".")[1:])
    return any(
        (Path(root) / relative).with_suffix(".py").is_file() or (Path(root) / relative).is_dir()
        for root in sglang.__path__
    )


def _not_applicable() -> PatchReport:
    return PatchReport(
        NAME,
        PatchState.NOT_APPLICABLE,
        f"this SGLang has no FlashInfer CUTLASS MoE runner module ({RUNNER_MODULE})",
    )


def install() -> PatchReport:
    """Arrange for every part to be patched when SGLang imports its module."""
    from sglang_nvfp4_patches.llama4_router_weight import ray_scheduler_actors
    from sglang_nvfp4_patches.post_import import when_imported

    if not module_exists(RUNNER_MODULE):
        return _not_applicable()
    when_imported(RUNNER_MODULE, patch_runner_module)
    for half in METHOD_HALVES:
        when_imported(half.module, method_patcher(half))
    ray_scheduler_actors.install()
    return summarize()


NO_REJECTION = "none in this release"


def _method_note(half: MethodHalf) -> tuple[str, str | None]:
    """Doctor's note on one method, and the problem if its rejection is still live."""
    method_cls = getattr(importlib.import_module(half.module), half.cls)
    if not rejects_router_weight_on_input(half, method_cls):
        return f"{half.label} rejection: {NO_REJECTION}", None
    if is_lifted(half):
        return f"{half.label} rejection: lifted", None
    problem = f"{half.cls}.{half.checked_in} still rejects apply_router_weight_on_input"
    return f"{half.label} rejection: not lifted", problem


def current_state() -> PatchReport:
    """What the installed SGLang holds now: imports the modules and looks at the objects."""
    from sglang_nvfp4_patches.llama4_router_weight import ray_scheduler_actors

    if not module_exists(RUNNER_MODULE):
        return _not_applicable()
    try:
        runner = importlib.import_module(RUNNER_MODULE)
        registry = fused_func_registry()
        method_notes = [_method_note(half) for half in METHOD_HALVES]
    except (ImportError, AttributeError, PatchUnavailable) as error:
        return PatchReport(NAME, PatchState.FAILED, f"cannot inspect: {error}")
    runner_upstream = hasattr(runner, UPSTREAM_PRESCALE)
    runner_patched = all(is_patched(registry.get(key)) for key in CUTLASS_FUSED_FUNC_KEYS)
    problems = [problem for _, problem in method_notes if problem]
    if not (runner_upstream or runner_patched):
        problems.insert(0, "CUTLASS fused functions still reject apply_router_weight_on_input")
    if problems:
        return PatchReport(NAME, PatchState.FAILED, "; ".join(problems))
    notes = ["runner pre-scale: " + ("upstream" if runner_upstream else "patched")]
    notes += [note for note, _ in method_notes]
    nothing_to_patch = runner_upstream and all(n.endswith(NO_REJECTION) for n in notes[1:])
    ray_note = ray_scheduler_actors.doctor_note()
    if ray_note:
        notes.append(ray_note)
    state = PatchState.ALREADY_UPSTREAM if nothing_to_patch else PatchState.APPLIED
    return PatchReport(NAME, state, "; ".join(notes))


def out_of_range_report() -> PatchReport:
    return outside_supported_range(NAME)


def summarize() -> PatchReport:
    """One report from the parts (``applied`` if any had to be patched)."""
    parts = outcomes.recorded()
    if not parts:
        return PatchReport(
            NAME, PatchState.APPLIED, "pending: patched when SGLang loads a MoE layer"
        )
    failed = [
        f"{part}: {report.reason}"
        for part, report in parts.items()
        if report.state is PatchState.FAILED
    ]
    if failed:
        return PatchReport(NAME, PatchState.FAILED, "; ".join(failed))
    states = {report.state for report in parts.values()}
    reason = "; ".join(report.reason for report in parts.values())
    if states == {PatchState.ALREADY_UPSTREAM} and len(parts) == 1 + len(METHOD_HALVES):
        return PatchReport(NAME, PatchState.ALREADY_UPSTREAM, reason)
    return PatchReport(NAME, PatchState.APPLIED, reason)


def explain_note(moe_runner: str | None) -> str:
    """One line for ``explain``'s Llama 4 rows, given the MoE runner the row ends on."""
    if moe_runner == CUTLASS_RUNNER:
        return (
            f"{NAME}: the CUTLASS runner pre-scales the top-1 router weight "
            "(apply_router_weight_on_input)"
        )
    return f"{NAME} acts only on the {CUTLASS_RUNNER} MoE runner"
