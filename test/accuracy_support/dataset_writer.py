"""Writes a small MMLU-format dataset whose questions carry their own id in the text.

The id marker ``[subject/index]`` lets the scripted server recognise which test question a
prompt asks (it is the last marker in the prompt), independently of the client's code.
"""

from __future__ import annotations

import csv
import itertools
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
    dev, test = _rows(sizes, dev_rows, seed)
    (root / "dev").mkdir(parents=True, exist_ok=True)
    (root / "test").mkdir(parents=True, exist_ok=True)
    for subject in sizes:
        _write_csv(root / "dev" / f"{subject}_dev.csv", [_csv_row(q) for q in dev[subject]])
        _write_csv(root / "test" / f"{subject}_test.csv", [_csv_row(q) for q in test[subject]])
    return {q.qid: q for questions in test.values() for q in questions}


def write_hub_dataset(
    root: Path, sizes: dict[str, int], dev_rows: int = 5, seed: int = 0
) -> dict[str, WrittenQuestion]:
    """The same questions as :func:`write_dataset`, as a local copy of a Hugging Face dataset
    repository in cais/mmlu's layout: config ``all`` with ``dev`` and ``test`` parquet files
    (schema question, subject, choices, answer as a ClassLabel A-D) declared in README.md.
    Subjects are interleaved row by row, so ids must come from the order within a subject."""
    import datasets  # installed with SGLang; only this writer needs it

    features = datasets.Features(
        {
            "question": datasets.Value("string"),
            "subject": datasets.Value("string"),
            "choices": datasets.Sequence(datasets.Value("string")),
            "answer": datasets.ClassLabel(names=list(LETTERS)),
        }
    )
    dev, test = _rows(sizes, dev_rows, seed)
    (root / "all").mkdir(parents=True, exist_ok=True)
    for split, by_subject in (("dev", dev), ("test", test)):
        rows = [q for group in itertools.zip_longest(*by_subject.values()) for q in group if q]
        columns = {
            "question": [q.question for q in rows],
            "subject": [q.subject for q in rows],
            "choices": [list(q.choices) for q in rows],
            "answer": [LETTERS.index(q.answer) for q in rows],
        }
        datasets.Dataset.from_dict(columns, features=features).to_parquet(
            str(root / "all" / f"{split}-00000-of-00001.parquet")
        )
    (root / "README.md").write_text(_HUB_README, encoding="utf-8")
    return {q.qid: q for questions in test.values() for q in questions}


_HUB_README = """---
configs:
- config_name: all
  data_files:
  - split: dev
    path: all/dev-*
  - split: test
    path: all/test-*
---
"""


def _rows(
    sizes: dict[str, int], dev_rows: int, seed: int
) -> tuple[dict[str, list[WrittenQuestion]], dict[str, list[WrittenQuestion]]]:
    """Dev examples and test questions per subject."""
    rng = random.Random(seed)
    dev: dict[str, list[WrittenQuestion]] = {}
    test: dict[str, list[WrittenQuestion]] = {}
    for subject, n_test in sizes.items():
        dev[subject] = [
            WrittenQuestion(
                f"{subject}/dev{i}",
                subject,
                i,
                f"Dev {i} of {subject}, example?",
                ("w", "x", "y", "z"),
                LETTERS[i % 4],
            )
            for i in range(dev_rows)
        ]
        test[subject] = []
        for index in range(n_test):
            qid = f"{subject}/{index}"
            text = f'[{qid}] Which "option", of four,\nis right for item {index}?'
            choices = (f"alpha {index}", f"beta, {index}", f'"gamma" {index}', f"delta {index}")
            answer = rng.choice(LETTERS)
            test[subject].append(WrittenQuestion(qid, subject, index, text, choices, answer))
    return dev, test


def _csv_row(question: WrittenQuestion) -> list[str]:
    return [question.question, *question.choices, question.answer]


def wrong_letter(answer: str) -> str:
    return LETTERS[(LETTERS.index(answer) + 1) % 4]


def _write_csv(path: Path, rows: list[list[str]]) -> None:
    with path.open("w", encoding="utf-8", newline="") as handle:
        csv.writer(handle).writerows(rows)
