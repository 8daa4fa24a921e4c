"""The behaviour behind ``llama4-router-weight``'s "upstream" and "none in this release",
gathered on CPU by ``verify`` and kept as a record (:mod:`sglang_nvfp4_patches.evidence_records`).

Reading SGLang's code proves a rejection present, never absent; a half of this patch stands
down only where SGLang's own code is shown to serve Llama 4's flag. Each run is the first MoE
layer of a bundled Llama 4 checkpoint on a simulated SM120, built as ``FusedMoE`` builds it,
its weights loaded and processed (``process_weights_after_loading`` included), one top-1
forward with the flag through the CPU reference of the CUTLASS kernel, the output compared
with ``expert(x*w)`` (:func:`..simulation.moe_forward.run_first_moe_layer`):

* **runner**: SGLang's registered CUTLASS fused function, called by ``MoeRunner`` with the
  real config (this plugin's pre-scale suspended), the method handed the flag-free view the
  lift gives it (so neither its check nor any pre-scale of its own gets in the way): upstream
  where one such layer serves;
* **each method** (ModelOpt, compressed-tensors): SGLang's own method (the lift suspended) on
  the runner as the server will have it, and the method lifted: upstream where SGLang's own
  serves, or runs on another runner; "lift serves" where only the lifted one does; "lifted,
  wrong" where SGLang's own raises and the lifted one computes something else than
  ``expert(x*w)`` (compressed-tensors on 0.5.16, whose loader keeps W13 as ``[gate; up]``
  for the CUTLASS kernel: a fault of the layer, flag or not).
"""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from packaging.version import Version

from sglang_nvfp4_patches.evidence_records import SHIPPED_NAME, Record, find_record
from sglang_nvfp4_patches.llama4_router_weight import NAME
from sglang_nvfp4_patches.simulation.moe_forward import SGLANG_SOURCES
from sglang_nvfp4_patches.status import sglang_version

SOURCES = SGLANG_SOURCES  # what every run goes through
SHIPPED = Path(__file__).with_name(SHIPPED_NAME)
RUNNER = "runner"
GPU = "sm120"
CUTLASS = "flashinfer_cutlass"
# fact states
UPSTREAM = "upstream"  # SGLang's own code serves top-1 with the flag
OTHER_RUNNER = "other runner"  # the method's layer does not run on the CUTLASS runner
LIFT_SERVES = "lift serves"  # SGLang's own method does not serve; lifted, it does
LIFTED_WRONG = "lifted, wrong"  # SGLang's own raises; lifted, it computes, but not expert(x*w)
FAILS = "fails"  # neither serves
NOT_SHOWN = "not shown"  # the runner: no layer shows SGLang's fused function serving
SERVING = (UPSTREAM, LIFT_SERVES)  # the method's layer serves top-1 with the flag on the runner


def current_record() -> Record | None:
    """The record that matches the SGLang this process imported, if any."""
    return find_record(NAME, sglang_version(), SOURCES, SHIPPED)


def current_facts() -> dict[str, Any] | None:
    record = current_record()
    return None if record is None else dict(record.facts)


@functools.cache
def _shipped_states(shipped: Path) -> tuple[tuple[str, Mapping[str, Any]], ...]:
    """Each release the records in ``shipped`` cover, and its facts."""
    try:
        items = json.loads(shipped.read_text())["records"]
        return tuple((item["sglang"], item["facts"]) for item in items)
    except (OSError, ValueError, KeyError, TypeError):
        return ()


def releases_serving(part: str) -> tuple[str, ...]:
    """The releases whose shipped record shows ``part``'s layer serving, oldest first."""
    found = [
        release
        for release, facts in _shipped_states(SHIPPED)
        if isinstance(facts.get(part), dict) and facts[part].get("state") in SERVING
    ]
    return tuple(sorted(found, key=Version))


def shown_by(record: Record | None) -> str:
    return "no record" if record is None else f"shown on CPU by {record.made_by}"


def _layers() -> dict[str, tuple[Path, dict[str, str]]]:
    """Per method part, the bundled checkpoint whose layer runs it, and the launch flags."""
    from sglang_nvfp4_patches.llama4_router_weight.rejecting_methods import (
        COMPRESSED_TENSORS,
        MODELOPT,
    )
    from sglang_nvfp4_patches.simulation.bundled import LLAMA4_NVFP4, LLAMA4_NVFP4_CT

    return {
        MODELOPT.part: (LLAMA4_NVFP4, {"moe_runner_backend": CUTLASS}),
        COMPRESSED_TENSORS.part: (LLAMA4_NVFP4_CT, {}),
    }


def hide_flag_from_method(layer: Any) -> None:
    """What the lift does once ``FusedMoE`` built the runner: the method (the scheme, for
    compressed-tensors) sees a flag-free view, its ``MoeRunner`` keeps the real config."""
    from sglang_nvfp4_patches.llama4_router_weight.flag_free_view import (
        without_router_weight_on_input,
    )

    holder = getattr(layer, "scheme", None) or layer.quant_method
    config = getattr(holder, "moe_runner_config", None)
    if config is not None:
        holder.moe_runner_config = without_router_weight_on_input(config)


def _run(part: str, lifted: bool) -> dict[str, Any]:
    from sglang_nvfp4_patches.llama4_router_weight.suspension import method_lift_suspended
    from sglang_nvfp4_patches.simulation.gpus import GPU_PROFILES
    from sglang_nvfp4_patches.simulation.moe_forward import run_first_moe_layer

    model_dir, flags = _layers()[part]
    with method_lift_suspended():
        run = run_first_moe_layer(
            model_dir, GPU_PROFILES[GPU], flags, hide_flag_from_method if lifted else None
        )
    if run is None:  # the bundled checkpoints are Llama 4 NVFP4 MoE, so never on a release
        raise RuntimeError(f"no MoE layer was run for {part}")
    return run.as_json()


def run_as_the_server(part: str) -> dict[str, Any]:
    """``part``'s layer with this process's hooks as they are: what a server runs."""
    from sglang_nvfp4_patches.simulation.gpus import GPU_PROFILES
    from sglang_nvfp4_patches.simulation.moe_forward import run_first_moe_layer

    model_dir, flags = _layers()[part]
    run = run_first_moe_layer(model_dir, GPU_PROFILES[GPU], flags)
    if run is None:
        raise RuntimeError(f"no MoE layer was run for {part}")
    return run.as_json()


def _runner_fact() -> dict[str, Any]:
    from sglang_nvfp4_patches.llama4_router_weight.suspension import runner_prescale_suspended

    runs = {}
    with runner_prescale_suspended():
        for part in _layers():
            runs[part] = _run(part, lifted=True)
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


@contextlib.contextmanager
def _runner_as_recorded(upstream: bool) -> Iterator[None]:
    """The runner as a server with this record has it: SGLang's own where it is upstream."""
    from sglang_nvfp4_patches.llama4_router_weight.suspension import runner_prescale_suspended

    with runner_prescale_suspended() if upstream else contextlib.nullcontext():
        yield


def gather() -> dict[str, Any]:
    """The runner's fact, then each method's on the runner that fact gives a server (in a
    process where SGLang loaded the plugin; call with the output of SGLang quietened)."""
    from sglang_nvfp4_patches.post_import import module_exists
    from sglang_nvfp4_patches.simulation.cutlass_kernel import RUNNER_MODULE

    if not module_exists(RUNNER_MODULE):
        return {RUNNER: {"state": "not applicable", "detail": f"no {RUNNER_MODULE}"}}
    facts = {RUNNER: _runner_fact()}
    with _runner_as_recorded(facts[RUNNER]["state"] == UPSTREAM):
        for part in _layers():
            facts[part] = method_fact(part)
    return facts


def outline(facts: Mapping[str, Any]) -> dict[str, str]:
    """What two gatherings must agree on: each half's state (not the free text)."""
    return {part: str(fact.get("state")) for part, fact in facts.items()}
