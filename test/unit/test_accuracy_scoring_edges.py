"""``accuracy``'s grading at its edges: the stored record, and where "collapsed" begins (no
SGLang import). Found by ``scripts/mutation.sh``."""

from __future__ import annotations

import pytest

from sglang_nvfp4_patches.accuracy.dataset import EvalItem, MmluQuestion
from sglang_nvfp4_patches.accuracy.limits import MAX_OUTPUT_CHARS
from sglang_nvfp4_patches.accuracy.scoring import is_collapsed, make_record


def test_the_stored_record_keeps_the_question_the_answer_and_the_raw_output() -> None:
    question = MmluQuestion("anatomy", 7, "Which bone?", ("a", "b", "c", "d"), "C")
    record = make_record(EvalItem(question, "prompt"), " C) the femur")
    assert record == {
        "id": question.id,
        "subject": "anatomy",
        "index": 7,
        "prediction": "C",
        "answer": "C",
        "correct": True,
        "output": " C) the femur",
    }


@pytest.mark.parametrize("extra", [-1, 0, 1])
def test_an_answer_is_cut_only_past_the_bound(extra: int) -> None:
    """Exactly the bound is kept whole and unmarked; one character more is cut and marked."""
    question = MmluQuestion("anatomy", 7, "Which bone?", ("a", "b", "c", "d"), "C")
    output = " C" + "y" * (MAX_OUTPUT_CHARS - 2 + extra)
    record = make_record(EvalItem(question, "prompt"), output)
    assert record["output"] == output[:MAX_OUTPUT_CHARS]
    assert record.get("output_cut") == (len(output) if extra > 0 else None)


@pytest.mark.parametrize(
    ("accuracy", "collapsed"),
    [(0.25, True), (3 / 10, True), (31 / 100, False), (0.9, False), (None, False)],
)
def test_collapsed_is_at_or_below_chance_plus_five_points(
    accuracy: float | None, collapsed: bool
) -> None:
    """Four choices: chance is 0.25, so 30 % right (3 of 10) is still guessing."""
    assert is_collapsed(accuracy) is collapsed
