"""MMLU-format data: SGLang's ``benchmark/mmlu`` csv layout, or a Hugging Face dataset.

Malformed input raises DatasetError naming file and line: a skipped row changes the question set.
A Hub dataset (``--data cais/mmlu``: config ``all``, splits dev and test) keeps its row order,
so ids ``<subject>/<index>`` match the csv ones; ``datasets`` is imported only to load one, and
an unreachable Hub turns offline mode on first, so a cached copy is used at once.
"""

from __future__ import annotations

import csv
import io
import os
import re
import sys
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
    try:  # a BOM is dropped after decoding, so that the offset counts from the start of the file
        text = raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise DatasetError(
            f"{path}:{line}: not valid UTF-8 at offset {exc.start} of the file (byte "
            f"0x{raw[exc.start]:02x}); re-save the file as UTF-8"
        ) from None
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


def build_prefix(source: CsvSource | HubSource, subject: str, shots: int) -> str:
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
    source: CsvSource | HubSource,
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


CONFIG = "all"
COLUMNS = ("question", "subject", "choices", "answer")
REACH_TIMEOUT_S = 5.0
DEFAULT_ENDPOINT = "https://huggingface.co"
OFFLINE_ENV = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")


class HubSource:
    """All questions of one dataset, loaded at once (MMLU's test split is 14,042 rows)."""

    def __init__(self, dataset_id: str) -> None:
        self.dataset_id = dataset_id
        splits = _load(dataset_id)
        self._test = questions_by_subject(splits["test"], f"{dataset_id} (test)")
        self._dev = questions_by_subject(splits["dev"], f"{dataset_id} (dev)")

    def subjects(self) -> list[str]:
        if not self._test:
            raise DatasetError(f"{self.dataset_id}: the 'test' split has no rows")
        return sorted(self._test)

    def test_questions(self, subject: str) -> list[MmluQuestion]:
        return self._test[subject]

    def dev_examples(self, subject: str) -> list[MmluQuestion]:
        examples = self._dev.get(subject)
        if not examples:
            raise DatasetError(
                f"{self.where(subject, 'dev')}: no few-shot examples for test subject "
                f"'{subject}' (use --shots 0 to run without examples)"
            )
        return examples

    def where(self, subject: str, split: str) -> str:
        return f"{self.dataset_id} (config {CONFIG}, split {split}, subject {subject})"


def hub_unreachable() -> str | None:
    """Why the Hub (``HF_ENDPOINT``) cannot be reached, or None (any HTTP answer counts)."""
    endpoint = os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT
    try:
        with urllib.request.urlopen(
            urllib.request.Request(endpoint, method="HEAD"), timeout=REACH_TIMEOUT_S
        ):
            return None
    except urllib.error.HTTPError:
        return None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return f"{endpoint} cannot be reached ({getattr(exc, 'reason', exc)})"


def _load(dataset_id: str) -> Mapping[str, Iterable[Mapping[str, Any]]]:
    """The ``dev`` and ``test`` splits; any failure of the library becomes one DatasetError."""
    unreachable = None
    offline = any(
        os.environ.get(name, "").upper() in ("1", "ON", "YES", "TRUE") for name in OFFLINE_ENV
    )
    if not Path(dataset_id).exists() and not offline:
        unreachable = hub_unreachable()
        if unreachable is not None:  # offline, in the environment and where it was read
            os.environ.update(dict.fromkeys(OFFLINE_ENV, "1"))
            for module in ("huggingface_hub.constants", "datasets.config"):
                if module in sys.modules:
                    sys.modules[module].HF_HUB_OFFLINE = True  # type: ignore[attr-defined]
    try:
        import datasets
    except ImportError:
        raise DatasetError(
            f"--data {dataset_id}: reading a Hugging Face dataset needs the 'datasets' package "
            "(installed with SGLang); install it, or pass an MMLU csv folder"
        ) from None
    try:
        loaded = datasets.load_dataset(dataset_id, CONFIG)
    except (OSError, ValueError, datasets.exceptions.DatasetsError) as exc:
        if unreachable is not None:
            raise DatasetError(
                f"--data {dataset_id}: the Hugging Face Hub is offline here ({unreachable}) "
                "and no copy of the dataset is cached: download it where there is network "
                "(or point HF_HOME at a cache that has it), or pass an MMLU csv folder"
            ) from None
        raise DatasetError(
            f"--data {dataset_id}: not a local MMLU csv folder, and loading it as a Hugging Face "
            f"dataset (config '{CONFIG}') failed: {type(exc).__name__}: {exc}"
        ) from None
    missing = [split for split in ("dev", "test") if split not in loaded]
    if missing:
        raise DatasetError(
            f"--data {dataset_id}: config '{CONFIG}' has no split {', '.join(missing)} "
            f"(has {', '.join(loaded)}); expected MMLU's 'dev' and 'test'"
        )
    return loaded


def questions_by_subject(
    rows: Iterable[Mapping[str, Any]], where: str
) -> dict[str, list[MmluQuestion]]:
    """Rows in order, grouped by subject; index = position among that subject's rows."""
    by_subject: dict[str, list[MmluQuestion]] = {}
    for position, row in enumerate(rows):  # answer: a ClassLabel index (0-3) or a letter
        where_row = f"{where} row {position}"
        missing = [column for column in COLUMNS if column not in row]
        if missing:
            raise DatasetError(
                f"{where_row}: no column {', '.join(missing)}; expected MMLU's {', '.join(COLUMNS)}"
            )
        subject, question = row["subject"], row["question"]
        choices, answer = row["choices"], row["answer"]
        if not (isinstance(subject, str) and subject and isinstance(question, str)):
            raise DatasetError(f"{where_row}: 'subject' and 'question' must be text")
        if not (
            isinstance(choices, (list, tuple))
            and len(choices) == len(CHOICE_LETTERS)
            and all(isinstance(choice, str) for choice in choices)
        ):
            raise DatasetError(f"{where_row}: 'choices' must be {len(CHOICE_LETTERS)} texts")
        if isinstance(answer, int) and 0 <= answer < len(CHOICE_LETTERS):
            letter = CHOICE_LETTERS[answer]
        elif isinstance(answer, str) and answer.strip().upper() in CHOICE_LETTERS:
            letter = answer.strip().upper()
        else:
            raise DatasetError(f"{where_row}: 'answer' must be 0-3 or A-D, found {answer!r}")
        questions = by_subject.setdefault(subject, [])
        questions.append(MmluQuestion(subject, len(questions), question, tuple(choices), letter))
    return by_subject


# ``org/name``: what --data takes as a Hugging Face dataset id when no such local path exists.
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def open_source(data: str | Path) -> CsvSource | HubSource:
    """A csv folder (with ``test/``), a Hub id, or a local copy of a Hub dataset repository."""
    path = Path(data)
    if (path / "test").is_dir():
        return CsvSource(path)
    if (path / "README.md").is_file() or (not path.exists() and _HUB_ID.match(str(data))):
        return HubSource(str(data))
    return CsvSource(path)
