"""Turning generated text into a graded record, and records into accuracies (pure)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sglang_nvfp4_patches.accuracy.dataset import CHOICE_LETTERS, EvalItem
from sglang_nvfp4_patches.accuracy.limits import MAX_OUTPUT_CHARS

CHANCE_ACCURACY = 1 / len(CHOICE_LETTERS)
COLLAPSE_MARGIN = 0.05
_LEADING_NOISE = " \t\r\n(*"


def parse_prediction(text: str) -> str | None:
    """The answer letter starting the generation (``" B"``, ``"(C)"``, not ``"Based"``), or None."""
    stripped = text.lstrip(_LEADING_NOISE)
    if not stripped or stripped[0] not in CHOICE_LETTERS or stripped[1:2].isalnum():
        return None
    return stripped[0]


def make_record(item: EvalItem, output: str) -> dict[str, Any]:
    """The stored answer for one question (``output`` kept for debugging collapses)."""
    question = item.question
    prediction = parse_prediction(output)
    cut = {"output_cut": len(output)} if len(output) > MAX_OUTPUT_CHARS else {}
    return {
        "id": question.id,
        "subject": question.subject,
        "index": question.index,
        "prediction": prediction,
        "answer": question.answer,
        "correct": prediction == question.answer,
        "output": output[:MAX_OUTPUT_CHARS],
        **cut,
    }


def score_by_subject(records: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """RUN.json's ``per_subject``: n, correct and accuracy, subjects in first-seen order."""
    counts: dict[str, list[int]] = {}
    for record in records:
        entry = counts.setdefault(record["subject"], [0, 0])
        entry[0] += 1
        entry[1] += bool(record["correct"])
    return {s: {"n": n, "correct": c, "accuracy": c / n} for s, (n, c) in counts.items()}


def is_collapsed(accuracy: float | None) -> bool:
    """At or below chance + 5 pp: the model is guessing (or worse), not answering."""
    return accuracy is not None and accuracy <= CHANCE_ACCURACY + COLLAPSE_MARGIN + 1e-12
