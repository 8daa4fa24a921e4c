"""Exceptions of the accuracy tool. Each :class:`AccuracyError` is a
:class:`~sglang_nvfp4_patches.errors.UsageError`: the top-level CLI reports it as
``error: <message>`` with exit code 2 instead of a traceback."""

from __future__ import annotations

from pathlib import Path

from sglang_nvfp4_patches.errors import UsageError


class AccuracyError(UsageError):
    """Base class: a problem with the user's input that the user can fix."""

    def cli_message(self) -> str:
        """The message exactly as worded: it quotes paths and the text of library errors
        (csv, JSON, ``datasets``) verbatim, so whitespace in them is kept."""
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
    """A server ``accuracy ab`` started did not come up or did not answer (exit 3); its log
    is kept at ``log``. Not a UsageError: ``ab`` prints it with the log's last lines."""

    def __init__(self, message: str, log: Path) -> None:
        super().__init__(message)
        self.log = log
