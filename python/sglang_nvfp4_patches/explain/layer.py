"""What happens to a row's first MoE layer: one forward on CPU with this process's hooks and
one as SGLang ships (:func:`..simulation.moe_forward.run_first_moe_layer`)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from sglang_nvfp4_patches.moe_layout import FIELDS, Layout, fate
from sglang_nvfp4_patches.patches import PATCHES
from sglang_nvfp4_patches.simulation.gpus import GpuProfile

# What a row's layout does to its one-GPU fate (LayerOutcome.layout_fate values).
AS_ONE_GPU, NOT_SHOWN, NO_FUSED_FUNCTION = "as on one GPU", "not shown", "no fused function"
RUNNER_FLAG = "--moe-runner-backend"


@dataclass(frozen=True)
class RunnerSearch:
    """The runner choices tried on a refused layer: those that served, those GPU-only."""

    serving: tuple[str, ...]
    not_simulated: tuple[str, ...]
    tried: int


def search_runners(model_dir: Path, gpu: GpuProfile, flags: Mapping[str, Any]) -> RunnerSearch:
    """For a layer a patch refuses where another runner may serve it (``runner_may_lift``): the
    layer run once with the user's ``flags`` on each ``--moe-runner-backend`` choice but
    ``auto``."""
    from sglang_nvfp4_patches.simulation.moe_forward import LayerVerdict, run_first_moe_layer
    from sglang_nvfp4_patches.simulation.server_args import flag_choices

    serving: list[str] = []
    not_simulated: list[str] = []
    candidates = [choice for choice in flag_choices(RUNNER_FLAG) if choice != "auto"]
    for runner in candidates:
        try:
            run = run_first_moe_layer(model_dir, gpu, {**flags, "moe_runner_backend": runner})
        except (ValueError, AssertionError):  # SGLang refuses the flag for this checkpoint
            continue
        if run is not None and run.verdict is LayerVerdict.SERVES:
            serving.append(runner)
        elif run is not None and run.verdict is LayerVerdict.NOT_SIMULATED:
            not_simulated.append(runner)
    return RunnerSearch(tuple(serving), tuple(not_simulated), len(candidates))


@dataclass(frozen=True)
class LayerOutcome:
    """The first MoE layer of a row's checkpoint on its simulated GPU."""

    runner: str | None  # the MoE runner backend the layer builds (with the patches)
    refused: str | None = None  # this plugin refuses the layer, and why
    fails: str | None = None  # with the patches, the layer still fails (or answers wrong)
    unpatched_runner: str | None = None  # the runner SGLang as it ships builds
    fails_unpatched: str | None = None  # SGLang as it ships fails there: how
    # For a layer refused because no runner it patches serves it: the runners tried instead
    search: RunnerSearch | None = None
    # What one forward showed (simulation.moe_forward.LayerVerdict values), patched and not
    verdict: str | None = None
    unpatched_verdict: str | None = None
    # A launch across GPUs or with an all-to-all backend: its flags, and what that does to the
    # one-GPU fate (AS_ONE_GPU, or NOT_SHOWN and why)
    layout: str | None = None
    layout_fate: str | None = None
    # Where the CPU cannot tell whether the layer serves: how far it got, patched and not
    unknown: str | None = None
    unknown_unpatched: str | None = None


def _failure(run: Any) -> str | None:
    return run.detail if run is not None and run.broken else None


def _unknown(run: Any) -> str | None:
    from sglang_nvfp4_patches.simulation.moe_forward import UNKNOWN

    return run.detail if run.verdict in UNKNOWN else None


def layer_outcome(
    model_dir: Path,
    gpu: GpuProfile,
    flags: Mapping[str, Any],
    as_it_ships: Callable[[], contextlib.AbstractContextManager[None]],
    patched: bool,
) -> LayerOutcome | None:
    """The row's layer (``None``: not a quantized MoE checkpoint on a Blackwell GPU).
    ``as_it_ships`` suspends every patch; ``patched``: this process's hooks are live."""
    from sglang_nvfp4_patches.simulation.moe_forward import LayerVerdict, run_first_moe_layer

    flags = {name: value for name, value in flags.items() if name not in FIELDS}  # one GPU
    with as_it_ships():
        unpatched = run_first_moe_layer(model_dir, gpu, flags)
    if unpatched is None:
        return None
    run = run_first_moe_layer(model_dir, gpu, flags) if patched else unpatched
    if run is None:
        return None
    refused = run.detail if run.verdict is LayerVerdict.REFUSED else None
    lifted = refused and any(patch.runner_may_lift(refused) for patch in PATCHES)
    search = search_runners(model_dir, gpu, flags) if lifted else None
    return LayerOutcome(
        run.runner,
        refused,
        _failure(run),
        unpatched.runner,
        _failure(unpatched),
        search,
        run.verdict.value,
        unpatched.verdict.value,
        unknown=_unknown(run),
        unknown_unpatched=_unknown(unpatched),
    )


def across(outcome: LayerOutcome, layout: Layout) -> LayerOutcome:
    """``outcome`` (one GPU) for ``layout``: where a side's runner has no fused function for
    the all-to-all backend, that side fails when the layer is built; where the release facts
    do not show the layout, its fate is unknown."""
    from sglang_nvfp4_patches import fused_functions
    from sglang_nvfp4_patches.moe_layout import shown_layouts

    if not layout.dimensions:
        return outcome
    shown = shown_layouts()

    def side(runner: str | None, verdict: str | None, fails: str | None) -> tuple[Any, ...]:
        found = fate(layout, runner, fused_functions.registered, fused_functions.runners_for, shown)
        if found.failure is not None:
            return "fails", f"when it is built: {found.failure}", NO_FUSED_FUNCTION
        if found.not_shown is not None and verdict is not None:
            return "not simulated", None, f"{NOT_SHOWN}: {found.not_shown}"
        return verdict, fails, AS_ONE_GPU

    verdict, fails, layout_fate = side(outcome.runner, outcome.verdict, outcome.fails)
    before, fails_before, _ = side(
        outcome.unpatched_runner, outcome.unpatched_verdict, outcome.fails_unpatched
    )
    return replace(
        outcome,
        verdict=verdict,
        fails=fails,
        unpatched_verdict=before,
        fails_unpatched=fails_before,
        layout=layout.flags,
        layout_fate=layout_fate,
    )
