"""The process entry of the console script and of ``python -m sglang_nvfp4_patches`` (pure).

Its first instruction puts the stop handling in place (:mod:`interrupts`: SIGTERM and SIGHUP
as Ctrl-C); only then is the command line imported (~0.1 s), so Ctrl-C or ``kill`` at any
moment from here on ends the process with one line and exit 130, never a traceback. The
interpreter's own start (a few milliseconds before this module runs) is Python's.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys


def main() -> int:  # never returns: os._exit
    """Run the command, then end the process at once with its status (``os._exit``): the
    seconds the interpreter would spend tearing down torch and SGLang are skipped. From the
    moment the status is fixed, stop requests are held back (blocked, never delivered), so
    every stop before it ends the command with 130 and one line, and none after it can end
    the process by its signal (143, 129) or turn a complete answer into 130."""
    status = _command()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # lost now: the status stays
            if stream is not None:
                stream.flush()
    os._exit(status)


def _command() -> int:
    try:
        from sglang_nvfp4_patches.interrupts import stop_requests_as_interrupt

        with stop_requests_as_interrupt():
            from sglang_nvfp4_patches.cli import main as command_line

            try:
                status = command_line()
            except SystemExit as done:  # argparse's --help, --version and usage errors
                status = int(done.code or 0)
            signal.pthread_sigmask(signal.SIG_BLOCK, _STOPS)
            return status
    except KeyboardInterrupt:  # before the command line's own handling was in place
        signal.pthread_sigmask(signal.SIG_BLOCK, _STOPS)
        return _interrupted()
    except Exception as error:  # a stop that an extension's import turned into another error
        from sglang_nvfp4_patches.interrupts import caused_by_interrupt

        if not caused_by_interrupt(error):
            raise
        signal.pthread_sigmask(signal.SIG_BLOCK, _STOPS)
        return _interrupted()


_STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _interrupted() -> int:
    from sglang_nvfp4_patches.errors import EXIT_INTERRUPTED
    from sglang_nvfp4_patches.interrupts import INTERRUPTED

    print(INTERRUPTED, file=sys.stderr)
    return EXIT_INTERRUPTED
