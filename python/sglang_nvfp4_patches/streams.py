"""stdout and stderr as the command line uses them: a failed write is never a bug (pure).
stdout that cannot be written is :class:`OutputUnwritable` (a reader that left early stays a
BrokenPipeError); stderr that cannot be written loses the message, never the exit status.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, TextIO

from sglang_nvfp4_patches.errors import EnvironmentProblem


class OutputUnwritable(EnvironmentProblem):
    """stdout is closed or cannot take the output."""


def discard(fd: int) -> None:
    """Point ``fd`` at /dev/null, so the interpreter's final flush does not print an error."""
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, fd)
    os.close(null)


class _Guarded:
    """A text stream whose write failures are handled as the module docstring says."""

    def __init__(self, stream: TextIO, is_stdout: bool) -> None:
        self._stream = stream
        self._is_stdout = is_stdout

    def _failed(self, error: OSError) -> None:
        if isinstance(error, BrokenPipeError) and self._is_stdout:
            raise error
        if self._is_stdout:
            raise OutputUnwritable(
                f"cannot write the output to stdout ({error.strerror or error}); send stdout "
                "somewhere it can be written"
            ) from None
        with contextlib.suppress(OSError, ValueError):
            discard(self._stream.fileno())

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError as error:
            self._failed(error)
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as error:
            self._failed(error)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def guarded(stream: TextIO | None, is_stdout: bool) -> TextIO | None:
    """``stream`` with its write failures handled (None, a closed descriptor, stays None)."""
    if stream is None or isinstance(stream, _Guarded):
        return stream
    return _Guarded(stream, is_stdout)  # type: ignore[return-value]


def printable(text: str) -> str:
    """``text`` from a server as it may reach a terminal: control characters escaped."""
    return "".join(c if c.isprintable() or c == " " else ascii(c)[1:-1] for c in text)
