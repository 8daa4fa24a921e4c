"""The behaviour behind ``llama4-router-weight``'s "upstream" and "none in this release",
gathered on CPU by ``verify``; its states are release facts (:mod:`..release_facts`).

Reading code proves a rejection present, never absent, so a half stands down only where
SGLang's own code is shown serving the flag: the first MoE layer of a bundled Llama 4
checkpoint on a simulated SM120, built, loaded and processed as ``FusedMoE`` does, one top-1
forward with the flag compared with ``expert(x*w)``. The **runner**: SGLang's registered fused
function (our pre-scale suspended), the method handed the flag-free view; **each method**:
SGLang's own (the lift suspended) and lifted, on the runner as the server will have it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from packaging.version import Version

from sglang_nvfp4_patches.llama4_router_weight.flag_free_view import without_router_weight_on_input
from sglang_nvfp4_patches.llama4_router_weight.rejecting_methods import (
    COMPRESSED_TENSORS,
    MODELOPT,
    REJECTING_METHODS,
)
from sglang_nvfp4_patches.llama4_router_weight.suspension import (
    method_lift_suspended,
    runner_prescale_suspended,
)
from sglang_nvfp4_patches.release_facts import SHIPPED, Row, parse

RUNNER = "runner"
PARTS = (RUNNER, *(method.part for method in REJECTING_METHODS))  # one column each
GPU = "sm120"
CUTLASS = "flashinfer_cutlass"
# fact states
UPSTREAM = "upstream"  # SGLang's own code serves top-1 with the flag
OTHER_RUNNER = "other runner"  # the method's layer does not run on the CUTLASS runner
LIFT_SERVES = "lift serves"  # SGLang's own method does not serve; lifted, it does
LIFTED_WRONG = "lifted, wrong"  # SGLang's own raises; lifted, it computes, but not expert(x*w)
FAILS = "fails"  # neither serves
NOT_SHOWN = "not shown"  # the runner: no layer shows SGLang's fused function serving
NOT_APPLICABLE = "not applicable"  # the runner: this release has no CUTLASS runner module
SERVING = (UPSTREAM, LIFT_SERVES)  # the method's layer serves top-1 with the flag on the runner
# The one sentence each state stands for (the release facts keep states only).
SENTENCES = {
    UPSTREAM: "SGLang's own layer serves top-1 with the flag",
    OTHER_RUNNER: "SGLang's own layer runs on another runner",
    LIFT_SERVES: "SGLang's own layer fails with the flag; lifted, it serves",
    LIFTED_WRONG: "lifted, the layer computes something other than expert(x*w)",
    FAILS: "the layer fails with the flag, lifted or not",
    NOT_SHOWN: "no layer shows it serving the flag",
    NOT_APPLICABLE: "this release has no FlashInfer CUTLASS runner module",
}
COLUMN = "l4:"  # + the part: l4:runner, l4:modelopt, l4:compressed-tensors
NOT_GATHERED = "-"


def cell_of(state: str) -> str:
    return state.replace(", ", "-").replace(" ", "-")


def cells(facts: Mapping[str, Mapping[str, Any]], parts: tuple[str, ...]) -> dict[str, str]:
    """The release-facts cells of gathered ``facts`` (``parts``: every column's part)."""
    return {
        COLUMN + part: cell_of(facts[part]["state"]) if part in facts else NOT_GATHERED
        for part in parts
    }


def facts_of(row: Row) -> dict[str, dict[str, str]] | None:
    """Each part's state and its sentence, as ``row`` gives them (``None``: no ``l4:`` cell)."""
    states = {cell_of(state): state for state in SENTENCES}
    ours = {
        column[len(COLUMN) :]: row.cell(column) for column in row.cells if column.startswith(COLUMN)
    }
    given = {part: cell for part, cell in ours.items() if cell is not None}
    if not given:
        return None
    return {
        part: {"state": states[cell], "detail": SENTENCES[states[cell]]}
        for part, cell in given.items()
        if cell in states
    }


def current_row() -> Row | None:
    """This SGLang's row, where it has this patch's cells."""
    from sglang_nvfp4_patches.release_facts import current_row as row_here

    row = row_here()
    return row if row is not None and facts_of(row) is not None else None


def current_facts() -> dict[str, Any] | None:
    return facts_of(row) if (row := current_row()) is not None else None


def releases_serving(part: str) -> tuple[str, ...]:
    """The releases whose shipped row shows ``part``'s layer serving, oldest first."""
    try:
        rows = parse(SHIPPED.read_text())[1]
    except OSError:
        rows = []
    found = {
        row.release
        for row in rows
        if ((facts_of(row) or {}).get(part) or {}).get("state") in SERVING
    }
    return tuple(sorted(found, key=Version))


def shown_by(row: Row | None) -> str:
    return "no record" if row is None else f"shown on CPU by {row.made_by}"


def _layers() -> dict[str, tuple[Path, dict[str, str]]]:
    """Per method part, the bundled checkpoint whose layer runs it, and the launch flags."""
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


def _run(part: str, lifted: bool) -> dict[str, Any]:
    with method_lift_suspended():
        return run_as_the_server(part, hide_flag_from_method if lifted else None)


def run_as_the_server(
    part: str, after_build: Callable[[Any], None] | None = None
) -> dict[str, Any]:
    """``part``'s layer with this process's hooks as they are: what a server runs."""
    from sglang_nvfp4_patches.simulation.gpus import GPU_PROFILES
    from sglang_nvfp4_patches.simulation.moe_forward import run_first_moe_layer

    model_dir, flags = _layers()[part]
    run = run_first_moe_layer(model_dir, GPU_PROFILES[GPU], flags, after_build)
    if run is None:  # the bundled checkpoints are Llama 4 NVFP4 MoE, so never on a release
        raise RuntimeError(f"no MoE layer was run for {part}")
    return run.as_json()


def _runner_fact() -> dict[str, Any]:
    with runner_prescale_suspended():
        runs = {part: _run(part, lifted=True) for part in _layers()}
    serving = [p for p, run in runs.items() if run["runner"] == CUTLASS and _serves(run)]
    state = UPSTREAM if serving else NOT_SHOWN
    detail = "; ".join(f"{part}: {run['runner']}, {run['detail']}" for part, run in runs.items())
    return {"state": state, "detail": detail, "runs": runs}


def _serves(run: dict[str, Any]) -> bool:
    return run["verdict"] == "serves"


def method_fact(part: str) -> dict[str, Any]:
    own, lifted = _run(part, lifted=False), _run(part, lifted=True)
    if _serves(own):
        state = UPSTREAM
    elif own["runner"] != CUTLASS:
        state = OTHER_RUNNER
    elif _serves(lifted):
        state = LIFT_SERVES
    elif own["verdict"] == "fails" and lifted["verdict"] == "wrong":
        state = LIFTED_WRONG
    else:
        state = FAILS
    detail = f"SGLang's own: {own['detail']}; lifted: {lifted['detail']}"
    return {"state": state, "detail": detail, "sglang": own, "lifted": lifted}


def gather() -> dict[str, Any]:
    """The runner's fact, then each method's on the runner that fact gives a server (in a
    process where SGLang loaded the plugin; call with the output of SGLang quietened)."""
    from sglang_nvfp4_patches.post_import import module_exists
    from sglang_nvfp4_patches.simulation.cutlass_kernel import RUNNER_MODULE

    if not module_exists(RUNNER_MODULE):
        return {RUNNER: {"state": NOT_APPLICABLE, "detail": f"no {RUNNER_MODULE}"}}
    facts = {RUNNER: _runner_fact()}
    upstream = facts[RUNNER]["state"] == UPSTREAM  # the runner as a server with this row has it
    with runner_prescale_suspended() if upstream else contextlib.nullcontext():
        for part in _layers():
            facts[part] = method_fact(part)
    return facts
