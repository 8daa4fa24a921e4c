"""MMLU-format data (SGLang's ``benchmark/mmlu`` csv layout) and the classic k-shot prompt.

Malformed input raises DatasetError naming file and line: a skipped row changes the question set.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from sglang_nvfp4_patches.accuracy.errors import DatasetError
from sglang_nvfp4_patches.accuracy.files import CSV_FILE, read_bounded

CHOICE_LETTERS: tuple[str, ...] = ("A", "B", "C", "D")
TEST_SUFFIX = "_test.csv"
DEV_SUFFIX = "_dev.csv"
_COLUMNS = 1 + len(CHOICE_LETTERS) + 1  # question, four options, answer letter


@dataclass(frozen=True)
class MmluQuestion:
    """One multiple-choice row; ``index`` counts the non-blank rows of its file from 0."""

    subject: str
    index: int
    question: str
    choices: tuple[str, ...]
    answer: str

    @property
    def id(self) -> str:
        """Stable id used to pair runs and to resume: ``<subject>/<index>``."""
        return f"{self.subject}/{self.index}"


@dataclass(frozen=True)
class EvalItem:
    """A test question together with the full prompt sent to the server."""

    question: MmluQuestion
    prompt: str

    @property
    def id(self) -> str:
        return self.question.id


def read_mmlu_csv(path: Path, subject: str) -> list[MmluQuestion]:
    """Parse one MMLU csv file; blank lines are ignored, anything else malformed raises."""
    try:
        raw = read_bounded(path, CSV_FILE)
    except OSError as exc:  # read_bounded leaves a missing file to its caller
        raise DatasetError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        try:  # again as plain UTF-8, so that the offset counts from the start of the file (BOM)
            raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = raw.count(b"\n", 0, exc.start) + 1
            raise DatasetError(
                f"{path}:{line}: not valid UTF-8 at offset {exc.start} of the file (byte "
                f"0x{raw[exc.start]:02x}); re-save the file as UTF-8"
            ) from None
        raise  # pragma: no cover - what utf-8-sig refuses, plain utf-8 refuses too
    questions: list[MmluQuestion] = []
    reader = csv.reader(io.StringIO(text, newline=""))
    while True:
        line = reader.line_num + 1  # first physical line of the next record
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            raise DatasetError(f"{path}:{line}: malformed csv ({exc})") from exc
        if not row or all(not cell.strip() for cell in row):
            continue
        if len(row) != _COLUMNS:
            raise DatasetError(
                f"{path}:{line}: expected {_COLUMNS} columns (question, A, B, C, D, answer), "
                f"found {len(row)}; quote fields that contain commas"
            )
        answer = row[-1].strip().upper()
        if answer not in CHOICE_LETTERS:
            raise DatasetError(
                f"{path}:{line}: answer must be one of {'/'.join(CHOICE_LETTERS)}, found "
                f"{row[-1]!r}"
            )
        questions.append(MmluQuestion(subject, len(questions), row[0], tuple(row[1:-1]), answer))
    return questions


def format_example(question: MmluQuestion, include_answer: bool) -> str:
    """One question block; few-shot blocks carry their answer, the asked one ends ``Answer:``."""
    options = "".join(
        f"\n{letter}. {text}" for letter, text in zip(CHOICE_LETTERS, question.choices, strict=True)
    )
    if include_answer:
        return f"{question.question}{options}\nAnswer: {question.answer}\n\n"
    return f"{question.question}{options}\nAnswer:"


def build_prefix(source: QuestionSource, subject: str, shots: int) -> str:
    """The header plus the first ``shots`` dev examples (too few raise); built once per subject."""
    examples = source.dev_examples(subject) if shots else []
    if len(examples) < shots:
        raise DatasetError(
            f"{source.where(subject, 'dev')}: has {len(examples)} example(s) but --shots {shots} "
            f"needs {shots}"
        )
    header = (
        "The following are multiple choice questions (with answers) about "
        f"{subject.replace('_', ' ')}.\n\n"
    )
    return header + "".join(format_example(q, include_answer=True) for q in examples[:shots])


class QuestionSource(Protocol):
    """Where questions come from: an MMLU csv folder or a Hugging Face dataset (``hub.py``)."""

    def subjects(self) -> list[str]: ...  # sorted, those with test questions

    def test_questions(self, subject: str) -> list[MmluQuestion]: ...  # in order: index is id

    def dev_examples(self, subject: str) -> list[MmluQuestion]: ...  # DatasetError when none

    def where(self, subject: str, split: str) -> str: ...  # for error messages


class CsvSource:
    """SGLang's ``benchmark/mmlu`` layout; files are read only for the subjects asked."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir

    def subjects(self) -> list[str]:
        data_dir = self.data_dir
        if not data_dir.is_dir():
            raise DatasetError(
                f"{data_dir}: not a directory; pass the MMLU data folder (or a Hugging Face "
                "dataset id such as cais/mmlu) with --data"
            )
        test_dir = data_dir / "test"
        if not test_dir.is_dir():
            raise DatasetError(
                f"{data_dir}: no 'test' folder; expected {data_dir}/test/<subject>{TEST_SUFFIX} "
                f"and {data_dir}/dev/<subject>{DEV_SUFFIX}"
            )
        # Every entry by that name, a FIFO or a directory too: reading it says what it is.
        subjects = sorted(p.name[: -len(TEST_SUFFIX)] for p in test_dir.glob(f"*{TEST_SUFFIX}"))
        if not subjects:
            raise DatasetError(f"{test_dir}: no *{TEST_SUFFIX} files found")
        return subjects

    def test_questions(self, subject: str) -> list[MmluQuestion]:
        return read_mmlu_csv(self._path(subject, "test"), subject)

    def dev_examples(self, subject: str) -> list[MmluQuestion]:
        dev_path = self._path(subject, "dev")
        if not os.path.lexists(dev_path):
            raise DatasetError(
                f"{dev_path}: missing dev file for test subject '{subject}' "
                "(needed for few-shot prompts; use --shots 0 to run without examples)"
            )
        return read_mmlu_csv(dev_path, subject)

    def where(self, subject: str, split: str) -> str:
        return str(self._path(subject, split))

    def _path(self, subject: str, split: str) -> Path:
        suffix = TEST_SUFFIX if split == "test" else DEV_SUFFIX
        return self.data_dir / split / f"{subject}{suffix}"


def select_subjects(available: Sequence[str], wanted: Iterable[str] | None) -> list[str]:
    """Apply ``--subjects``; unknown names raise instead of silently shrinking the run."""
    if wanted is None:
        return list(available)
    chosen = list(dict.fromkeys(s.strip() for s in wanted if s.strip()))
    if not chosen:
        raise DatasetError("--subjects is empty; give a comma-separated list of subject names")
    unknown = [s for s in chosen if s not in available]
    if unknown:
        shown = ", ".join(available[:10]) + (", ..." if len(available) > 10 else "")
        raise DatasetError(f"unknown subject(s) {', '.join(unknown)}; available: {shown}")
    return chosen


def load_eval_items(
    source: QuestionSource,
    shots: int,
    subjects: Iterable[str] | None = None,
    limit: int | None = None,
) -> list[EvalItem]:
    """All prompts of a run in subject order; ``limit`` keeps the first N questions each."""
    items: list[EvalItem] = []
    for subject in select_subjects(source.subjects(), subjects):
        questions = source.test_questions(subject)
        if not questions:
            raise DatasetError(f"{source.where(subject, 'test')}: no questions in file")
        prefix = build_prefix(source, subject, shots)
        selected = questions if limit is None else questions[:limit]
        items.extend(
            EvalItem(q, prefix + format_example(q, include_answer=False)) for q in selected
        )
    return items
