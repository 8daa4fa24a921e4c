"""Patch ``llama4-router-weight``: the FlashInfer CUTLASS MoE runner and the NVFP4 MoE methods.

Llama 4 builds its MoE with ``apply_router_weight_on_input=True``; the CUTLASS kernel only
scales expert outputs. For top-1 routing, multiplying each token's activations by its router
weight before quantization and handing the kernel unit float32 scales is exact. Three places
reject the flag on this path, each probed and patched on its own, when SGLang imports the
module that holds it (:mod:`sglang_nvfp4_patches.post_import`):

* the runner's fused functions (:mod:`.runner_registry`; upstream from 0.5.21);
* ``ModelOptNvFp4FusedMoEMethod`` and ``CompressedTensorsW4A4Nvfp4MoE``
  (:mod:`.method_lift`; still rejecting in 0.5.23), where each layer is also checked when
  it is built (:mod:`.rule`, :mod:`.layer_facts`) and refused with the switch that fixes it
  (:mod:`.refusals`).
"""

from __future__ import annotations

import importlib
from pathlib import Path

from sglang_nvfp4_patches.flashinfer_cutlass_runner import outcomes
from sglang_nvfp4_patches.flashinfer_cutlass_runner.flag_free_view import (
    without_router_weight_on_input,
)
from sglang_nvfp4_patches.flashinfer_cutlass_runner.method_lift import (
    COMPRESSED_TENSORS,
    METHOD_HALVES,
    MODELOPT,
    MethodHalf,
    is_lifted,
    method_patcher,
    rejects_router_weight_on_input,
)
from sglang_nvfp4_patches.flashinfer_cutlass_runner.outcomes import PATCH_NAME
from sglang_nvfp4_patches.flashinfer_cutlass_runner.runner_registry import (
    CUTLASS_FUSED_FUNC_KEYS,
    FLASHINFER_A2A,
    REGISTRY_MODULE,
    RUNNER_MODULE,
    STANDARD_DISPATCH,
    UPSTREAM_PRESCALE,
    fused_func_registry,
    honour_router_weight_on_input,
    is_patched,
    patch_runner_module,
    prequantized_remedies,
)
from sglang_nvfp4_patches.status import (
    PatchReport,
    PatchState,
    PatchUnavailable,
    outside_supported_range,
)

__all__ = [
    "COMPRESSED_TENSORS",
    "CUTLASS_FUSED_FUNC_KEYS",
    "FLASHINFER_A2A",
    "METHOD_HALVES",
    "MODELOPT",
    "PATCH_NAME",
    "REGISTRY_MODULE",
    "RUNNER_MODULE",
    "STANDARD_DISPATCH",
    "UPSTREAM_PRESCALE",
    "current_state",
    "honour_router_weight_on_input",
    "install",
    "is_patched",
    "module_exists",
    "out_of_range_report",
    "prequantized_remedies",
    "rejects_router_weight_on_input",
    "summarize",
    "without_router_weight_on_input",
]


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
        PATCH_NAME,
        PatchState.NOT_APPLICABLE,
        f"this SGLang has no FlashInfer CUTLASS MoE runner module ({RUNNER_MODULE})",
    )


def install() -> PatchReport:
    """Arrange for every part to be patched when SGLang imports its module."""
    from sglang_nvfp4_patches.flashinfer_cutlass_runner import ray_scheduler_actors
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
    from sglang_nvfp4_patches.flashinfer_cutlass_runner import ray_scheduler_actors

    if not module_exists(RUNNER_MODULE):
        return _not_applicable()
    try:
        runner = importlib.import_module(RUNNER_MODULE)
        registry = fused_func_registry()
        method_notes = [_method_note(half) for half in METHOD_HALVES]
    except (ImportError, AttributeError, PatchUnavailable) as error:
        return PatchReport(PATCH_NAME, PatchState.FAILED, f"cannot inspect: {error}")
    runner_upstream = hasattr(runner, UPSTREAM_PRESCALE)
    runner_patched = all(is_patched(registry.get(key)) for key in CUTLASS_FUSED_FUNC_KEYS)
    problems = [problem for _, problem in method_notes if problem]
    if not (runner_upstream or runner_patched):
        problems.insert(0, "CUTLASS fused functions still reject apply_router_weight_on_input")
    if problems:
        return PatchReport(PATCH_NAME, PatchState.FAILED, "; ".join(problems))
    notes = ["runner pre-scale: " + ("upstream" if runner_upstream else "patched")]
    notes += [note for note, _ in method_notes]
    nothing_to_patch = runner_upstream and all(n.endswith(NO_REJECTION) for n in notes[1:])
    ray_note = ray_scheduler_actors.doctor_note()
    if ray_note:
        notes.append(ray_note)
    state = PatchState.ALREADY_UPSTREAM if nothing_to_patch else PatchState.APPLIED
    return PatchReport(PATCH_NAME, state, "; ".join(notes))


def out_of_range_report() -> PatchReport:
    return outside_supported_range(PATCH_NAME)


def summarize() -> PatchReport:
    """One report from the parts (``applied`` if any had to be patched)."""
    parts = outcomes.recorded()
    if not parts:
        return PatchReport(
            PATCH_NAME, PatchState.APPLIED, "pending: patched when SGLang loads a MoE layer"
        )
    failed = [
        f"{part}: {report.reason}"
        for part, report in parts.items()
        if report.state is PatchState.FAILED
    ]
    if failed:
        return PatchReport(PATCH_NAME, PatchState.FAILED, "; ".join(failed))
    states = {report.state for report in parts.values()}
    reason = "; ".join(report.reason for report in parts.values())
    if states == {PatchState.ALREADY_UPSTREAM} and len(parts) == 1 + len(METHOD_HALVES):
        return PatchReport(PATCH_NAME, PatchState.ALREADY_UPSTREAM, reason)
    return PatchReport(PATCH_NAME, PatchState.APPLIED, reason)
