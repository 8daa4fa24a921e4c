"""The behaviour :func:`.rule.decide` decides from, gathered on CPU by ``verify``; its states
are release facts (:mod:`..release_facts`, one column per :class:`.rule.Part`).

The first MoE layer of a bundled Llama 4 checkpoint on a simulated SM120, built, loaded and
processed as ``FusedMoE`` does, one top-1 forward with the flag compared with ``expert(x*w)``.
The **runner**: SGLang's registered fused function (our pre-scale suspended), the method handed
the flag-free view; **each method**: SGLang's own (the lift suspended) and lifted, on the
runner as the server will have it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from packaging.version import Version

from sglang_nvfp4_patches.llama4_router_weight import outcomes
from sglang_nvfp4_patches.llama4_router_weight.flag_free_view import without_router_weight_on_input
from sglang_nvfp4_patches.llama4_router_weight.rule import (
    COMPRESSED_TENSORS,
    CUTLASS,
    MODELOPT,
    REJECTING_METHODS,
    RUNNER_MODULE,
    SERVING,
    Facts,
    Part,
    Shown,
)
from sglang_nvfp4_patches.release_facts import Row, shipped_rows

GPU = "sm120"
COLUMN = "l4:"  # every Part's column starts so
NOT_GATHERED = "-"


def cells(found: Mapping[Part, Mapping[str, Any]]) -> dict[str, str]:
    """The release-facts cells of gathered facts (each ``{"state": Shown, ...}``)."""
    return {
        part.value: found[part]["state"].cell if part in found else NOT_GATHERED for part in Part
    }


def shown_in(row: Row) -> dict[Part, Shown]:
    by_cell = {state.cell: state for state in Shown}
    given = {part: row.cell(part.value) for part in Part}
    return {part: by_cell[cell] for part, cell in given.items() if cell in by_cell}


def facts_of(row: Row) -> Facts | None:
    """What ``row`` shows (``None``: no ``l4:`` cell), with the releases whose shipped rows show
    serving each method that it shows computing wrong, lifted."""
    shown = shown_in(row)
    if not any(row.cell(part.value) is not None for part in Part):
        return None
    wrong = [part for part, state in shown.items() if state is Shown.LIFTED_WRONG]
    serving = {part: releases_serving(part) for part in wrong}
    return Facts(row.release, row.made_by, shown, serving)


def current_facts() -> Facts | None:
    """This SGLang's facts, where its row has this patch's cells."""
    from sglang_nvfp4_patches.release_facts import current_row

    row = current_row()
    return None if row is None else facts_of(row)


def releases_serving(part: Part) -> tuple[str, ...]:
    """The releases whose shipped row shows ``part``'s layer serving, oldest first."""
    found = {row.release for row in shipped_rows() if shown_in(row).get(part) in SERVING}
    return tuple(sorted(found, key=Version))


def _layers() -> dict[Part, tuple[Path, dict[str, str]]]:
    """Per method, the bundled checkpoint whose layer runs it, and the launch flags."""
    from sglang_nvfp4_patches.simulation.bundled import LLAMA4_NVFP4, LLAMA4_NVFP4_CT

    return {
        MODELOPT.part: (LLAMA4_NVFP4, {"moe_runner_backend": CUTLASS}),
        COMPRESSED_TENSORS.part: (LLAMA4_NVFP4_CT, {}),
    }


def hide_flag_from_method(layer: Any) -> None:
    """What the lift does once ``FusedMoE`` built the runner: the method (the scheme, for
    compressed-tensors) sees a flag-free view, its ``MoeRunner`` keeps the real config."""
    holder = getattr(layer, "scheme", None) or layer.quant_method
    config = getattr(holder, "moe_runner_config", None)
    if config is not None:
        holder.moe_runner_config = without_router_weight_on_input(config)


def _run(part: Part, lifted: bool) -> dict[str, Any]:
    with outcomes.METHOD_LIFT.suspended():
        return run_as_the_server(part, hide_flag_from_method if lifted else None)


def run_as_the_server(
    part: Part, after_build: Callable[[Any], None] | None = None
) -> dict[str, Any]:
    """``part``'s layer with this process's hooks as they are: what a server runs."""
    from sglang_nvfp4_patches.simulation.gpus import GPU_PROFILES
    from sglang_nvfp4_patches.simulation.moe_forward import run_first_moe_layer

    model_dir, flags = _layers()[part]
    run = run_first_moe_layer(model_dir, GPU_PROFILES[GPU], flags, after_build)
    if run is None:  # the bundled checkpoints are Llama 4 NVFP4 MoE, so never on a release
        raise RuntimeError(f"no MoE layer was run for {part.key}")
    return run.as_json()


def _serves(run: dict[str, Any]) -> bool:
    return run["verdict"] == "serves"


def _runner_fact() -> dict[str, Any]:
    with outcomes.RUNNER_PRESCALE.suspended():
        runs = {part: _run(part, lifted=True) for part in _layers()}
    serving = [run for run in runs.values() if run["runner"] == CUTLASS and _serves(run)]
    detail = "; ".join(
        f"{part.key}: {run['runner']}, {run['detail']}" for part, run in runs.items()
    )
    return {"state": Shown.UPSTREAM if serving else Shown.NOT_SHOWN, "detail": detail, "runs": runs}


def method_fact(part: Part) -> dict[str, Any]:
    own, lifted = _run(part, lifted=False), _run(part, lifted=True)
    if _serves(own):
        state = Shown.UPSTREAM
    elif own["runner"] != CUTLASS:
        state = Shown.OTHER_RUNNER
    elif _serves(lifted):
        state = Shown.LIFT_SERVES
    elif own["verdict"] == "fails" and lifted["verdict"] == "wrong":
        state = Shown.LIFTED_WRONG
    else:
        state = Shown.FAILS
    detail = f"SGLang's own: {own['detail']}; lifted: {lifted['detail']}"
    return {"state": state, "detail": detail, "sglang": own, "lifted": lifted}


def gather() -> dict[Part, dict[str, Any]]:
    """The runner's fact, then each method's on the runner that fact gives a server (in a
    process where SGLang loaded the plugin; call with the output of SGLang quietened)."""
    from sglang_nvfp4_patches.post_import import module_exists

    if not module_exists(RUNNER_MODULE):
        return {Part.RUNNER: {"state": Shown.NOT_APPLICABLE, "detail": f"no {RUNNER_MODULE}"}}
    facts = {Part.RUNNER: _runner_fact()}
    upstream = facts[Part.RUNNER]["state"] is Shown.UPSTREAM  # the runner as a server has it
    with outcomes.RUNNER_PRESCALE.suspended() if upstream else contextlib.nullcontext():
        for method in REJECTING_METHODS:
            facts[method.part] = method_fact(method.part)
    return facts
