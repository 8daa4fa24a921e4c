"""Exceptions of the accuracy tool; each :class:`AccuracyError` is a UsageError (exit 2)."""

from __future__ import annotations

from pathlib import Path

from sglang_nvfp4_patches.errors import UsageError


class AccuracyError(UsageError):
    """Base class: a problem with the user's input that the user can fix."""

    def cli_message(self) -> str:
        """The message verbatim: the paths and library errors it quotes keep their whitespace."""
        return str(self)


class DatasetError(AccuracyError):
    """An MMLU-format data directory or csv file is missing or malformed."""


class RunFileError(AccuracyError):
    """A run result file (``RUN.json``) cannot be read or does not have the expected shape."""


class ResumeError(AccuracyError):
    """The partial results next to ``RUN.json`` belong to a run with different settings."""


class BusyError(AccuracyError):
    """Another process is writing the same run file right now (it holds the file's lock)."""


class CompareError(AccuracyError):
    """Two run files cannot be compared (e.g. they share no question ids)."""


class ConfigError(AccuracyError):
    """A run setting is out of range (e.g. ``--parallel 0``)."""


class ServerError(Exception):
    """A server ``ab`` started did not come up or answer (exit 3); ``ab`` prints ``log``'s tail."""

    def __init__(self, message: str, log: Path) -> None:
        super().__init__(message)
        self.log = log
