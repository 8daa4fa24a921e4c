"""For a layer the plugin refuses because no runner it patches can serve it (the refusing
patch's declaration says so: ``runner_may_lift``), which MoE runner this SGLang offers does
serve it: each ``--moe-runner-backend`` choice of the installed SGLang's own parser, run once
through the same layer forward (:func:`..simulation.moe_forward.run_first_moe_layer`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sglang_nvfp4_patches.simulation.gpus import GpuProfile

RUNNER_FLAG = "--moe-runner-backend"


@dataclass(frozen=True)
class RunnerSearch:
    """Every runner choice tried on the refused layer: those whose forward served it, and
    those that reached GPU-only code, which the CPU cannot show serving or failing."""

    serving: tuple[str, ...]
    not_simulated: tuple[str, ...]
    tried: int


def runner_choices() -> tuple[str, ...]:
    """The MoE runner backends the installed SGLang's own server parser offers."""
    from sglang_nvfp4_patches.simulation.server_args import flag_choices

    return flag_choices(RUNNER_FLAG)


def search_runners(model_dir: Path, gpu: GpuProfile, flags: Mapping[str, Any]) -> RunnerSearch:
    """Run the layer once with the user's ``flags`` on each runner choice but ``auto``."""
    from sglang_nvfp4_patches.simulation.moe_forward import LayerVerdict, run_first_moe_layer

    serving: list[str] = []
    not_simulated: list[str] = []
    candidates = [choice for choice in runner_choices() if choice != "auto"]
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
