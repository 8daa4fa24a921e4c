"""SIGTERM handled as Ctrl-C is (pure).

``kill``, a job timeout or a container stop sends SIGTERM to this process only; its default
action ends the process at once, leaving what it started (``ab``'s servers, ``verify``'s
check processes) running under PID 1 and its temporary files behind, and printing nothing.
Raised as KeyboardInterrupt instead, it takes the path Ctrl-C takes: the same clean-up and
the same one line saying what was kept.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt while the block runs (main thread only: signal's
    rule; elsewhere the block runs unchanged)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
