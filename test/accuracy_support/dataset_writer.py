"""Writes a small MMLU-format dataset whose questions carry their own id in the text.

The id marker ``[subject/index]`` lets the scripted server recognise which test question a
prompt asks (it is the last marker in the prompt), independently of the client's code.
"""

from __future__ import annotations

import csv
import random
import re
from dataclasses import dataclass
from pathlib import Path

LETTERS = "ABCD"
ID_MARKER = re.compile(r"\[([A-Za-z0-9_]+/\d+)\]")


@dataclass(frozen=True)
class WrittenQuestion:
    """What the test knows about one test question, independently of the loader."""

    qid: str
    subject: str
    index: int
    question: str
    choices: tuple[str, str, str, str]
    answer: str


def question_id_in(prompt: str) -> str | None:
    """The id of the question a prompt asks: the last id marker in it."""
    found = ID_MARKER.findall(prompt)
    return found[-1] if found else None


def write_dataset(
    root: Path, sizes: dict[str, int], dev_rows: int = 5, seed: int = 0
) -> dict[str, WrittenQuestion]:
    """``root/dev/<s>_dev.csv`` and ``root/test/<s>_test.csv``; returns test questions by id.

    Question texts contain commas, quotes and a newline so the csv quoting path is exercised.
    """
    rng = random.Random(seed)
    (root / "dev").mkdir(parents=True, exist_ok=True)
    (root / "test").mkdir(parents=True, exist_ok=True)
    written: dict[str, WrittenQuestion] = {}
    for subject, n_test in sizes.items():
        dev = [
            [f"Dev {i} of {subject}, example?", "w", "x", "y", "z", LETTERS[i % 4]]
            for i in range(dev_rows)
        ]
        _write_csv(root / "dev" / f"{subject}_dev.csv", dev)
        rows = []
        for index in range(n_test):
            qid = f"{subject}/{index}"
            text = f'[{qid}] Which "option", of four,\nis right for item {index}?'
            choices = (f"alpha {index}", f"beta, {index}", f'"gamma" {index}', f"delta {index}")
            answer = rng.choice(LETTERS)
            rows.append([text, *choices, answer])
            written[qid] = WrittenQuestion(qid, subject, index, text, choices, answer)
        _write_csv(root / "test" / f"{subject}_test.csv", rows)
    return written


def wrong_letter(answer: str) -> str:
    return LETTERS[(LETTERS.index(answer) + 1) % 4]


def _write_csv(path: Path, rows: list[list[str]]) -> None:
    with path.open("w", encoding="utf-8", newline="") as handle:
        csv.writer(handle).writerows(rows)
