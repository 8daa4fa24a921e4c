"""For a layer a patch refuses where another runner may serve it (``runner_may_lift``): each
``--moe-runner-backend`` choice SGLang offers, run once through the same layer forward."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sglang_nvfp4_patches.simulation.gpus import GpuProfile

RUNNER_FLAG = "--moe-runner-backend"


@dataclass(frozen=True)
class RunnerSearch:
    """The runner choices tried on a refused layer: those that served, those GPU-only."""

    serving: tuple[str, ...]
    not_simulated: tuple[str, ...]
    tried: int


def search_runners(model_dir: Path, gpu: GpuProfile, flags: Mapping[str, Any]) -> RunnerSearch:
    """Run the layer once with the user's ``flags`` on each runner choice but ``auto``."""
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
