"""Files that are not small regular files, for tests of what reads them, and a guard that turns
a read that would block forever into a test failure."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

T = TypeVar("T")


def fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def sparse(path: Path, size: int) -> Path:
    """A regular file of ``size`` bytes that takes no disk space."""
    with path.open("wb") as handle:
        handle.truncate(size)
    return path


def within(seconds: float, call: Callable[[], T]) -> T:
    """``call()``'s result or exception; a test failure when it has not returned after
    ``seconds`` (a read of a FIFO without a writer never returns)."""
    outcome: list[tuple[bool, object]] = []

    def target() -> None:
        try:
            outcome.append((True, call()))
        except BaseException as error:  # handed to the test's thread
            outcome.append((False, error))

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    if not outcome:
        pytest.fail(f"still blocked after {seconds:g} s")
    ok, value = outcome[0]
    if not ok:
        raise value  # type: ignore[misc]
    return value  # type: ignore[return-value]
