"""``method_lift.decide``: what each NVFP4 MoE method gets, from what its code is read to do
and what the record of behaviour for this SGLang shows (pure: no SGLang is imported).

Reading proves a rejection present, never absent: without a record, anything but a read
rejection is ``unknown`` (lifted all the same); "none in this release" needs a record that
shows SGLang's own layer serving. Where a record shows the lifted layer computing something
other than ``expert(x*w)``, every such layer is refused when it is built, naming what serves."""

from __future__ import annotations

from typing import Any

import pytest

from sglang_nvfp4_patches.llama4_router_weight.evidence import releases_serving
from sglang_nvfp4_patches.llama4_router_weight.method_lift import decide, still_rejects
from sglang_nvfp4_patches.llama4_router_weight.rejecting_methods import (
    COMPRESSED_TENSORS,
    MODELOPT,
)
from sglang_nvfp4_patches.llama4_router_weight.rejection_question import Reading, Verdict
from sglang_nvfp4_patches.release_facts import Row
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


def record(*states: tuple[str, str], release: str = "0.5.99", made_by: str = "CI") -> Row:
    """A release-facts row giving each ``(part, cell)``."""
    return Row(release, "f" * 16, {f"l4:{part}": cell for part, cell in states}, made_by)


def never_read() -> Reading:
    raise AssertionError("the code was read although the row settles the decision")


SERVES = record(("modelopt", "upstream"))
LIFT_ONLY = record(("modelopt", "lift-serves"))
NEITHER = record(("modelopt", "fails"))
ELSEWHERE = record(("modelopt", "other-runner"))
WRONG = record(("modelopt", "lifted-wrong"))
UNGATHERED = record(("runner", "not-applicable"), ("modelopt", "-"))


@pytest.mark.parametrize(
    ("reading", "evidence", "state", "note", "lift"),
    [
        (REJECTS, None, PatchState.APPLIED, "lifted", True),
        (REJECTS, UNGATHERED, PatchState.APPLIED, "lifted", True),
        (USES, UNGATHERED, PatchState.UNKNOWN, "cannot tell", True),
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
    reading: Reading, evidence: Row | None, state: PatchState, note: str, lift: bool
) -> None:
    decision = decide(MODELOPT, lambda: reading, evidence)
    assert (decision.state, decision.lift) == (state, lift), decision
    assert decision.note.startswith(note), decision.note
    # only a lifted layer shown computing wrong is refused whatever the layer's facts
    assert (decision.refusal is not None) is (evidence is WRONG), decision


@pytest.mark.parametrize("evidence", [SERVES, LIFT_ONLY, NEITHER, ELSEWHERE, WRONG])
def test_a_row_that_settles_it_never_reads_the_code(evidence: Row) -> None:
    """A server on a release with a row imports no reader: the decision comes from the row."""
    decide(MODELOPT, never_read, evidence)


# 0.5.16's row as CI made it: the compressed-tensors layer, lifted, computes wrong; the
# ModelOpt one serves lifted.
WRONG_HERE = record(
    ("modelopt", "lift-serves"), ("compressed-tensors", "lifted-wrong"), release="0.5.16"
)


def test_a_lifted_layer_shown_computing_wrong_is_refused_naming_what_serves() -> None:
    """What an operator reads when SGLang's model loader reports the refusal, word for word:
    the releases the shipped records show serving this checkpoint (the release itself left
    out), and the other checkpoint format its own record shows serving here."""
    serving = ("0.5.16", "0.5.17", "0.5.18")
    decision = decide(COMPRESSED_TENSORS, never_read, WRONG_HERE, serving)
    assert decision.refusal == (
        "apply_router_weight_on_input=True (Llama 4): on SGLang 0.5.16 this MoE layer's "
        "CompressedTensorsW4A4Nvfp4MoE, with its rejection of the flag lifted, computes "
        "something other than expert(x*w) on the FlashInfer CUTLASS MoE runner (lifted, the "
        "layer computes something other than expert(x*w); shown on CPU by CI): wrong results, "
        "no error, "
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
    decision = decide(COMPRESSED_TENSORS, never_read, WRONG_HERE, serving)
    assert decision.refusal is not None and named in decision.refusal, decision.refusal


def test_with_nothing_shown_serving_the_refusal_says_so() -> None:
    alone = record(
        ("compressed-tensors", "lifted-wrong"), release="0.5.16", made_by="verify on this machine"
    )
    decision = decide(COMPRESSED_TENSORS, never_read, alone, ("0.5.16",))
    assert decision.refusal is not None
    assert decision.refusal.endswith(
        "(lifted, the layer computes something other than expert(x*w); shown on CPU by verify "
        "on this machine): wrong results, no error, so sglang-nvfp4-patches refuses the layer. No "
        "tested SGLang release is shown serving a compressed-tensors NVFP4 layer."
    ), decision.refusal


@pytest.mark.parametrize("rejecting", [MODELOPT, COMPRESSED_TENSORS], ids=lambda r: r.part)
def test_the_releases_shown_serving_come_from_the_shipped_records(rejecting: Any) -> None:
    serving = releases_serving(rejecting.part)
    assert serving and list(serving) == shipped_llama4_serving(rejecting.part)


def test_no_record_never_reads_as_upstream() -> None:
    for reading in (USES, NOTHING, UNREAD):
        decision = decide(MODELOPT, lambda reading=reading: reading, None)
        assert "none in this release" not in decision.reason + decision.note
        assert decision.reason.endswith("; run `sglang-nvfp4-patches verify`"), decision.reason


def test_upstream_names_the_behaviour_that_shows_it() -> None:
    decision = decide(MODELOPT, never_read, SERVES)
    assert decision.note == (
        "none in this release (ModelOptNvFp4FusedMoEMethod's own layer serves with top-1 and "
        "apply_router_weight_on_input (SGLang's own layer serves top-1 with the flag; shown on "
        "CPU by CI))"
    )


def test_a_top_k_only_rejection_is_named_as_such() -> None:
    assert still_rejects(MODELOPT, TOP_K_ONLY) == (
        "ModelOptNvFp4FusedMoEMethod.apply still rejects apply_router_weight_on_input with "
        "top-k > 1 (top-1 passes its check)"
    )
    assert still_rejects(MODELOPT, REJECTS) == (
        "ModelOptNvFp4FusedMoEMethod.apply still rejects apply_router_weight_on_input"
    )
