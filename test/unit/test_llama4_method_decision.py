"""``method_lift.decide``: what each NVFP4 MoE method gets, from what its code is read to do
and what the record of behaviour for this SGLang shows (pure: no SGLang is imported).

Reading proves a rejection present, never absent: without a record, anything but a read
rejection is ``unknown`` (lifted all the same); "none in this release" needs a record that
shows SGLang's own layer serving. Where a record shows the lifted layer computing something
other than ``expert(x*w)``, every such layer is refused when it is built, naming what serves."""

from __future__ import annotations

from typing import Any

import pytest

from sglang_nvfp4_patches.evidence_records import Record
from sglang_nvfp4_patches.llama4_router_weight.evidence import releases_serving
from sglang_nvfp4_patches.llama4_router_weight.method_lift import decide, still_rejects
from sglang_nvfp4_patches.llama4_router_weight.rejecting_methods import (
    COMPRESSED_TENSORS,
    MODELOPT,
)
from sglang_nvfp4_patches.llama4_router_weight.rejection_question import Reading, Verdict
from sglang_nvfp4_patches.status import PatchState
from support.release import shipped_llama4_serving

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


def fact(state: str, own: str, lifted: str, runner: str = "flashinfer_cutlass") -> dict:
    return {"state": state, "detail": "d", "sglang": run(own, runner), "lifted": run(lifted)}


def record(state: str, own: str, lifted: str, runner: str = "flashinfer_cutlass") -> Record:
    facts = {"modelopt": fact(state, own, lifted, runner)}
    return Record("llama4-router-weight", "0.5.99", "f" * 64, "CI", facts)


SERVES = record("upstream", "serves", "serves")
LIFT_ONLY = record("lift serves", "fails", "serves")
NEITHER = record("fails", "fails", "fails")
ELSEWHERE = record("other runner", "other kernel", "other kernel", runner="cutlass")
WRONG = record("lifted, wrong", "fails", "wrong")


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
        (REJECTS, WRONG, PatchState.APPLIED, "refused when the layer is built (", True),
        (NOTHING, WRONG, PatchState.APPLIED, "refused when the layer is built (", True),
    ],
)
def test_decide(
    reading: Reading, evidence: Record | None, state: PatchState, note: str, lift: bool
) -> None:
    decision = decide(MODELOPT, reading, evidence)
    assert (decision.state, decision.lift) == (state, lift), decision
    assert decision.note.startswith(note), decision.note
    # only a lifted layer shown computing wrong is refused whatever the layer's facts
    assert (decision.refusal is not None) is (evidence is WRONG), decision


# 0.5.16's record as CI made it: the compressed-tensors layer, lifted, computes wrong; the
# ModelOpt one serves lifted.
WRONG_HERE = Record(
    "llama4-router-weight",
    "0.5.16",
    "f" * 64,
    "CI",
    {
        "modelopt": fact("lift serves", "fails", "serves"),
        "compressed-tensors": {
            **fact("lifted, wrong", "fails", "wrong"),
            "lifted": {**run("wrong"), "detail": "output != expert(x*w) (relative error 1.2e+00)"},
        },
    },
)


def test_a_lifted_layer_shown_computing_wrong_is_refused_naming_what_serves() -> None:
    """What an operator reads when SGLang's model loader reports the refusal, word for word:
    the releases the shipped records show serving this checkpoint (the release itself left
    out), and the other checkpoint format its own record shows serving here."""
    serving = ("0.5.16", "0.5.17", "0.5.18")
    decision = decide(COMPRESSED_TENSORS, REJECTS, WRONG_HERE, serving)
    assert decision.refusal == (
        "apply_router_weight_on_input=True (Llama 4): on SGLang 0.5.16 this MoE layer's "
        "CompressedTensorsW4A4Nvfp4MoE, with its rejection of the flag lifted, computes "
        "something other than expert(x*w) on the FlashInfer CUTLASS MoE runner (output != "
        "expert(x*w) (relative error 1.2e+00); shown on CPU by CI): wrong results, no error, "
        "so sglang-nvfp4-patches refuses the layer. Serve this compressed-tensors NVFP4 "
        "checkpoint on SGLang 0.5.17 or 0.5.18 (shown serving there), or serve a ModelOpt "
        "NVFP4 checkpoint of the model (shown serving on SGLang 0.5.16)."
    )
    # doctor's note says the same, and never that the layer is lifted
    assert decision.note.startswith("refused when the layer is built (lifted, ")
    assert "0.5.17 or 0.5.18 (shown serving there), or serve a ModelOpt NVFP4" in decision.note


@pytest.mark.parametrize(
    ("serving", "named"),
    [
        (("0.5.17",), "on SGLang 0.5.17 (shown serving there)"),
        (("0.5.17", "0.5.18", "0.5.19"), "on SGLang 0.5.17, 0.5.18 or 0.5.19 (shown serving"),
    ],
)
def test_the_releases_shown_serving_are_named_in_order(serving: tuple, named: str) -> None:
    decision = decide(COMPRESSED_TENSORS, REJECTS, WRONG_HERE, serving)
    assert decision.refusal is not None and named in decision.refusal, decision.refusal


def test_with_nothing_shown_serving_the_refusal_says_so() -> None:
    alone = Record(
        WRONG_HERE.patch,
        WRONG_HERE.sglang,
        WRONG_HERE.fingerprint,
        "verify on this machine",
        {"compressed-tensors": WRONG_HERE.facts["compressed-tensors"]},
    )
    decision = decide(COMPRESSED_TENSORS, REJECTS, alone, ("0.5.16",))
    assert decision.refusal is not None
    assert decision.refusal.endswith(
        "(output != expert(x*w) (relative error 1.2e+00); shown on CPU by verify on this "
        "machine): wrong results, no error, so sglang-nvfp4-patches refuses the layer. No "
        "tested SGLang release is shown serving a compressed-tensors NVFP4 layer."
    ), decision.refusal


@pytest.mark.parametrize("rejecting", [MODELOPT, COMPRESSED_TENSORS], ids=lambda r: r.part)
def test_the_releases_shown_serving_come_from_the_shipped_records(rejecting: Any) -> None:
    serving = releases_serving(rejecting.part)
    assert serving and list(serving) == shipped_llama4_serving(rejecting.part)


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
