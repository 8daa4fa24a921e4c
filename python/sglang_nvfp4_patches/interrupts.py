"""Stop requests: SIGTERM and SIGHUP handled as Ctrl-C is (pure), so what a command started
(``ab``'s servers, ``verify``'s children) and its temporary files get Ctrl-C's clean-up and one
line (exit 130), even with SIGINT ignored (a background job); SIGHUP ignored at start (``nohup``)
stays ignored. A KeyboardInterrupt Python swallows and prints (``sys.unraisablehook``: a weakref
callback or ``__del__``; ``sys.excepthook``: an extension's ``PyErr_Print``) is sent again.
"""

from __future__ import annotations

import _thread
import contextlib
import signal
import sys
from collections.abc import Callable, Coroutine, Iterator
from types import FrameType

INTERRUPTED = "interrupted"  # the line a stopped command prints when it has nothing to add

_held = 0  # how many stop_requests_held blocks are running
_requested = False  # a Ctrl-C or stop request arrived in stop_requests_as_interrupt's block


def _interrupt(signum: int, frame: FrameType | None) -> None:
    global _requested
    _requested = True
    signal.default_int_handler(signum, frame)


def _stop(signum: int, frame: FrameType | None) -> None:
    global _requested
    if _held:
        return  # a clean-up that must finish is running; it ends the command anyway
    _requested = True
    # Whatever Ctrl-C does now (asyncio's runner cancels its main task), else KeyboardInterrupt.
    handler = signal.getsignal(signal.SIGINT)
    if callable(handler):
        handler(signal.SIGINT, frame)
        return
    raise KeyboardInterrupt


def _in_main_thread() -> bool:
    """Without importing threading (the console script installs this first, at once)."""
    try:
        signal.signal(signal.SIGTERM, signal.getsignal(signal.SIGTERM))
    except ValueError:  # signal's rule: handlers are set in the main thread only
        return False
    return True


def _send_stop_soon() -> None:
    import time

    time.sleep(0.01)
    _thread.interrupt_main(signal.SIGTERM)  # handled in the main thread, as a signal is


def _sent_again(error: object) -> bool:
    if isinstance(error, KeyboardInterrupt) and _requested:
        # From another thread, a moment later: sent from here, Python would swallow it again.
        _thread.start_new_thread(_send_stop_soon, ())
        return True
    return False


@contextlib.contextmanager
def stop_requests_as_interrupt() -> Iterator[None]:
    """SIGTERM (and SIGHUP unless ignored) raise KeyboardInterrupt while the block runs, and
    Ctrl-C is noted first (main thread only: signal's rule; elsewhere nothing changes)."""
    global _requested
    if not _in_main_thread():
        yield
        return
    if signal.getsignal(signal.SIGTERM) is not _stop:  # not inside another such block
        _requested = False
    stops = [signal.SIGTERM]
    if signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:  # nohup's choice stays
        stops.append(signal.SIGHUP)
    previous = {stop: signal.signal(stop, _stop) for stop in stops}
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        previous[signal.SIGINT] = signal.signal(signal.SIGINT, _interrupt)
    unraisable, printed = hooks = sys.unraisablehook, sys.excepthook  # printed: PyErr_Print's
    sys.unraisablehook = lambda lost: _sent_again(lost.exc_value) or unraisable(lost)
    sys.excepthook = lambda *lost: _sent_again(lost[1]) or printed(*lost)
    try:
        yield
    finally:
        sys.unraisablehook, sys.excepthook = hooks
        for stop, handler in previous.items():
            signal.signal(stop, handler)


def stop_requested() -> bool:
    """A Ctrl-C or stop request arrived in the block, even if some code caught it."""
    return _requested


def caused_by_interrupt(error: BaseException) -> bool:
    """Whether ``error`` came out of a Ctrl-C or stop request: one arrived in
    :func:`stop_requests_as_interrupt`'s block, or a KeyboardInterrupt is among its causes (an
    interrupted C extension's import raises SystemError or ImportError: the user's stop)."""
    if _requested:
        return True
    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


@contextlib.contextmanager
def python_ctrl_c() -> Iterator[None]:
    """Python's own SIGINT handler in the block, where asyncio's runner needs it to cancel its
    main task on Ctrl-C (instead of our note-taking one)."""
    if signal.getsignal(signal.SIGINT) is not _interrupt:
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, _interrupt)


@contextlib.contextmanager
def stop_requests_held() -> Iterator[None]:
    """Neither Ctrl-C nor a stop request interrupts the block (main thread only)."""
    global _held
    if not _in_main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    _held += 1
    try:
        yield
    finally:
        _held -= 1
        signal.signal(signal.SIGINT, previous)


@contextlib.contextmanager
def stop_requests_deferred() -> Iterator[None]:
    """A Ctrl-C or stop request arriving in the block takes effect as it ends (main thread only):
    for a step that must finish once begun, as starting a process that must then be stopped."""
    if not _in_main_thread():
        yield
        return
    arrived: list[int] = []
    previous: dict[int, Callable[[int, FrameType | None], object]] = {}
    for stop in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        handler = signal.getsignal(stop)
        if callable(handler):  # ignored and default dispositions stay as they are
            previous[stop] = handler
            signal.signal(stop, lambda signum, _frame: arrived.append(signum))
    try:
        yield
    finally:
        for stop, handler in previous.items():
            signal.signal(stop, handler)
    if arrived:
        previous[arrived[0]](arrived[0], None)


async def until_stop_request(coro: Coroutine[object, object, None]) -> bool:
    """Await ``coro``, a stop request cancelling it as asyncio's runner does on Ctrl-C (not a
    KeyboardInterrupt in some task: "never retrieved"); ``True`` where a stop ended it."""
    import asyncio

    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(coro)
    requested: list[int] = []

    def request(stop: int) -> None:
        requested.append(stop)
        task.cancel()

    taken = [stop for stop in (signal.SIGTERM, signal.SIGHUP) if signal.getsignal(stop) is _stop]
    for stop in taken:
        loop.add_signal_handler(stop, request, stop)
    try:
        await task
    except asyncio.CancelledError:
        if not requested:
            raise
    finally:
        for stop in taken:
            loop.remove_signal_handler(stop)
            signal.signal(stop, _stop)
    return bool(requested)
