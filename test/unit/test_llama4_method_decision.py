"""``method_lift.decide``: what each NVFP4 MoE method gets, from what its code is read to do
and what the record of behaviour for this SGLang shows (pure: no SGLang is imported).

Reading proves a rejection present, never absent: without a record, anything but a read
rejection is ``unknown`` (lifted all the same); "none in this release" needs a record that
shows SGLang's own layer serving."""

from __future__ import annotations

from typing import Any

import pytest

from sglang_nvfp4_patches.evidence_records import Record
from sglang_nvfp4_patches.llama4_router_weight.method_lift import decide, still_rejects
from sglang_nvfp4_patches.llama4_router_weight.rejecting_methods import MODELOPT
from sglang_nvfp4_patches.llama4_router_weight.rejection_question import Reading, Verdict
from sglang_nvfp4_patches.status import PatchState

REJECTS = Reading(Verdict.REJECTS, ("assert at m.py:3",), ("assert at m.py:3",))
USES = Reading(Verdict.USES, ("hands it to a callee at m.py:4",))
NOTHING = Reading(Verdict.DOES_NOT_READ, ())
UNREAD = Reading(Verdict.UNKNOWN, ("hands self to _CHECKS[0] at m.py:5",))
TOP_K_ONLY = Reading(
    Verdict.REJECTS,
    ("raise ValueError only with top-k > 1 at m.py:6",),
    ("raise ValueError only with top-k > 1 at m.py:6",),
    only_top_k_above_1=True,
)


def run(verdict: str, runner: str = "flashinfer_cutlass") -> dict[str, Any]:
    return {"verdict": verdict, "runner": runner, "detail": f"the layer {verdict}"}


def record(state: str, own: str, lifted: str, runner: str = "flashinfer_cutlass") -> Record:
    fact = {"state": state, "detail": "d", "sglang": run(own, runner), "lifted": run(lifted)}
    return Record("llama4-router-weight", "0.5.99", "f" * 64, "CI", {"modelopt": fact})


SERVES = record("upstream", "serves", "serves")
LIFT_ONLY = record("lift serves", "fails", "serves")
NEITHER = record("fails", "fails", "fails")
ELSEWHERE = record("other runner", "other kernel", "other kernel", runner="cutlass")


@pytest.mark.parametrize(
    ("reading", "evidence", "state", "note", "lift"),
    [
        (REJECTS, None, PatchState.APPLIED, "lifted", True),
        (USES, None, PatchState.UNKNOWN, "cannot tell", True),
        (NOTHING, None, PatchState.UNKNOWN, "cannot tell", True),
        (UNREAD, None, PatchState.UNKNOWN, "cannot tell", True),
        (NOTHING, SERVES, PatchState.ALREADY_UPSTREAM, "none in this release (", False),
        (USES, ELSEWHERE, PatchState.ALREADY_UPSTREAM, "none in this release (", False),
        (TOP_K_ONLY, SERVES, PatchState.ALREADY_UPSTREAM, "none in this release (", False),
        (NOTHING, LIFT_ONLY, PatchState.APPLIED, "lifted", True),
        (UNREAD, LIFT_ONLY, PatchState.APPLIED, "lifted", True),
        (REJECTS, LIFT_ONLY, PatchState.APPLIED, "lifted", True),
        (NOTHING, NEITHER, PatchState.FAILED, "not lifted", False),
        (REJECTS, NEITHER, PatchState.FAILED, "not lifted", False),
    ],
)
def test_decide(
    reading: Reading, evidence: Record | None, state: PatchState, note: str, lift: bool
) -> None:
    decision = decide(MODELOPT, reading, evidence)
    assert (decision.state, decision.lift) == (state, lift), decision
    assert decision.note.startswith(note), decision.note


def test_no_record_never_reads_as_upstream() -> None:
    for reading in (USES, NOTHING, UNREAD):
        decision = decide(MODELOPT, reading, None)
        assert "none in this release" not in decision.reason + decision.note
        assert decision.reason.endswith("; run `sglang-nvfp4-patches verify`"), decision.reason


def test_upstream_names_the_behaviour_that_shows_it() -> None:
    decision = decide(MODELOPT, TOP_K_ONLY, SERVES)
    assert decision.note == (
        "none in this release (ModelOptNvFp4FusedMoEMethod's own layer serves with top-1 and "
        "apply_router_weight_on_input (the layer serves; shown on CPU by CI); its check "
        "(raise ValueError only with top-k > 1 at m.py:6) does not stop top-1)"
    )


def test_a_top_k_only_rejection_is_named_as_such() -> None:
    assert still_rejects(MODELOPT, TOP_K_ONLY) == (
        "ModelOptNvFp4FusedMoEMethod.apply still rejects apply_router_weight_on_input with "
        "top-k > 1 (top-1 passes its check)"
    )
    assert still_rejects(MODELOPT, REJECTS) == (
        "ModelOptNvFp4FusedMoEMethod.apply still rejects apply_router_weight_on_input"
    )
