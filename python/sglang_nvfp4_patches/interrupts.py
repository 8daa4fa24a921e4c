"""SIGTERM handled as Ctrl-C is (pure).

``kill``, a job timeout or a container stop sends SIGTERM to this process only; its default
action ends the process at once, leaving what it started (``ab``'s servers, ``verify``'s
check processes) running under PID 1 and its temporary files behind, and printing nothing.
Handled as SIGINT is at that moment instead (KeyboardInterrupt, or asyncio's own clean
cancellation while an event loop runs), it takes the path Ctrl-C takes: the same clean-up and
the same one line saying what was kept.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt while the block runs (main thread only: signal's
    rule; elsewhere the block runs unchanged)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        # Whatever Ctrl-C does right now: asyncio's runner cancels its main task (so the
        # KeyboardInterrupt comes out of ``run``, not out of one of its tasks), a block that
        # ignores SIGINT ignores this too, and elsewhere it is KeyboardInterrupt.
        handler = signal.getsignal(signal.SIGINT)
        if handler is signal.SIG_IGN:
            return
        if callable(handler):
            handler(signal.SIGINT, frame)
            return
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
