"""What happens to a row's first MoE layer: one forward on CPU with this process's hooks and
one as SGLang ships (:func:`..simulation.moe_forward.run_first_moe_layer`)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sglang_nvfp4_patches.explain.runner_search import RunnerSearch, search_runners
from sglang_nvfp4_patches.patches import PATCHES
from sglang_nvfp4_patches.simulation.gpus import GpuProfile


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


def _failure(run: Any) -> str | None:
    return run.detail if run is not None and run.broken else None


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
    )
