"""Stop requests: SIGTERM and SIGHUP handled as Ctrl-C is (pure).

``kill``, ``timeout``, a job timeout, a service manager or a container stop sends SIGTERM to
this process only; a closed terminal sends SIGHUP. Their default action ends the process at
once, leaving what it started (``ab``'s servers, ``verify``'s check processes) running under
PID 1 and its temporary files behind, and printing nothing. Handled as a KeyboardInterrupt
instead, they take the path Ctrl-C takes: the same clean-up and the same one line saying what
was kept (exit 130).

A stop request is honoured whatever SIGINT's disposition: a background job of a script (a
shell without job control) starts with SIGINT ignored, and ``kill $pid`` must still stop it.
Ctrl-C keeps following SIGINT's disposition (noted as it arrives, where SIGINT has Python's
own handler, so that a stop an extension's import turned into another error stays a stop).
SIGHUP ignored when the process starts
(``nohup``) stays ignored. Inside :func:`stop_requests_held` (a clean-up that must finish)
neither Ctrl-C nor a stop request interrupts.

A KeyboardInterrupt raised inside a weakref callback or a ``__del__`` (an import lock's
clean-up, ``importlib._bootstrap``'s ``cb``) is swallowed by Python, which prints "Exception
ignored in" and goes on: once an ``accuracy run`` went on waiting for its server. Inside the
block such a lost stop is sent again, and lands in the code that was running.
"""

from __future__ import annotations

import _thread
import contextlib
import functools
import signal
import sys
from collections.abc import Callable, Coroutine, Iterator
from types import FrameType

INTERRUPTED = "interrupted"  # the line a stopped command prints when it has nothing to add

_held = 0  # how many stop_requests_held blocks are running
# A Ctrl-C or stop request arrived while stop_requests_as_interrupt's block ran. A C
# extension's import can replace the KeyboardInterrupt it met with an error that does not
# name it (``ssl``'s ``_ssl``: "PyCapsule_Import could not import module "_socket""), so
# what the command fails with then is still the stop.
_requested = False


def _interrupt(signum: int, frame: FrameType | None) -> None:
    """Ctrl-C: noted, then Python's own handling (KeyboardInterrupt)."""
    global _requested
    _requested = True
    signal.default_int_handler(signum, frame)


def _stop(signum: int, frame: FrameType | None) -> None:
    global _requested
    if _held:
        return  # a clean-up that must finish is running; it ends the command anyway
    _requested = True
    # Whatever Ctrl-C does right now where it stops the command: asyncio's runner cancels
    # its main task (so the KeyboardInterrupt comes out of ``run``, not out of one of its
    # tasks); elsewhere, SIGINT ignored included, it is KeyboardInterrupt.
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


def _send_lost_stop_again(previous: Callable[[object], object], unraisable: object) -> None:
    """``sys.unraisablehook`` inside the block: a stop Python swallowed is sent again (as a
    stop request, which ends the command as Ctrl-C would); anything else goes on as before."""
    if isinstance(getattr(unraisable, "exc_value", None), KeyboardInterrupt) and _requested:
        # From another thread, a moment later: sent from here, the handler would run at once,
        # inside this hook, and Python would swallow it again.
        _thread.start_new_thread(_send_stop_soon, ())
        return
    previous(unraisable)


@contextlib.contextmanager
def stop_requests_as_interrupt() -> Iterator[None]:
    """SIGTERM (and SIGHUP unless it is ignored) raise KeyboardInterrupt while the block runs,
    and Ctrl-C where SIGINT has Python's own handler is noted before it does (main thread only:
    signal's rule; elsewhere the block runs unchanged)."""
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
    previous_hook = sys.unraisablehook
    sys.unraisablehook = functools.partial(_send_lost_stop_again, previous_hook)
    try:
        yield
    finally:
        sys.unraisablehook = previous_hook
        for stop, handler in previous.items():
            signal.signal(stop, handler)


def stop_requested() -> bool:
    """A Ctrl-C or stop request arrived in the block (even if some code caught it)."""
    return _requested


def caused_by_interrupt(error: BaseException) -> bool:
    """Whether ``error`` came out of a Ctrl-C or stop request: one arrived while
    :func:`stop_requests_as_interrupt`'s block ran, or a KeyboardInterrupt is among what caused
    it. An interrupt inside a C extension's import comes out as a SystemError raised from it
    (numpy's ``_umath_linalg`` while torch loads), or as an ImportError that does not name it
    (``_ssl`` importing ``_socket``); that is the user's stop, never a broken installation or a
    bug."""
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
    """Python's own SIGINT handler for the block where :func:`stop_requests_as_interrupt` put
    its note-taking one: asyncio's runner cancels its main task on Ctrl-C only where it finds
    Python's (a KeyboardInterrupt raised inside a task instead is reported as never retrieved).
    """
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


async def until_stop_request(coro: Coroutine[object, object, None]) -> bool:
    """Await ``coro`` in the running event loop, a stop request cancelling it as asyncio's
    runner cancels its main task on Ctrl-C; ``True`` where a stop request ended it (its
    clean-up has run), ``False`` where it finished.

    Without this, a stop request with SIGINT ignored raises KeyboardInterrupt inside whichever
    task is running, where asyncio reports it as "Task exception was never retrieved"."""
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
