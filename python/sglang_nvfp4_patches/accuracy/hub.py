"""MMLU from the Hugging Face Hub (``--data cais/mmlu``, config ``all``, splits dev and test).

``datasets`` is imported only here. An unreachable Hub turns offline mode on first, so a cached
copy is used at once. Rows keep their order, so ids ``<subject>/<index>`` match the csv ones.
"""

from __future__ import annotations

import os
import re
import sys
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from sglang_nvfp4_patches.accuracy.dataset import (
    CHOICE_LETTERS,
    CsvSource,
    MmluQuestion,
    QuestionSource,
)
from sglang_nvfp4_patches.accuracy.errors import DatasetError

CONFIG = "all"
TEST_SPLIT = "test"
DEV_SPLIT = "dev"
COLUMNS = ("question", "subject", "choices", "answer")
REACH_TIMEOUT_S = 5.0
DEFAULT_ENDPOINT = "https://huggingface.co"
OFFLINE_ENV = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")


class HubSource:
    """All questions of one dataset, loaded at once (MMLU's test split is 14,042 rows)."""

    def __init__(self, dataset_id: str) -> None:
        self.dataset_id = dataset_id
        splits = _load(dataset_id)
        self._test = questions_by_subject(splits[TEST_SPLIT], f"{dataset_id} ({TEST_SPLIT})")
        self._dev = questions_by_subject(splits[DEV_SPLIT], f"{dataset_id} ({DEV_SPLIT})")

    def subjects(self) -> list[str]:
        if not self._test:
            raise DatasetError(f"{self.dataset_id}: the '{TEST_SPLIT}' split has no rows")
        return sorted(self._test)

    def test_questions(self, subject: str) -> list[MmluQuestion]:
        return self._test[subject]

    def dev_examples(self, subject: str) -> list[MmluQuestion]:
        examples = self._dev.get(subject)
        if not examples:
            raise DatasetError(
                f"{self.where(subject, DEV_SPLIT)}: no few-shot examples for test subject "
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
    missing = [split for split in (DEV_SPLIT, TEST_SPLIT) if split not in loaded]
    if missing:
        raise DatasetError(
            f"--data {dataset_id}: config '{CONFIG}' has no split {', '.join(missing)} "
            f"(has {', '.join(loaded)}); expected MMLU's '{DEV_SPLIT}' and '{TEST_SPLIT}'"
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


def open_source(data: str | Path) -> QuestionSource:
    """A csv folder (with ``test/``), a Hub id, or a local copy of a Hub dataset repository."""
    path = Path(data)
    if (path / "test").is_dir():
        return CsvSource(path)
    if (path / "README.md").is_file() or (not path.exists() and _HUB_ID.match(str(data))):
        return HubSource(str(data))
    return CsvSource(path)
