"""The process entry of the console script and of ``python -m sglang_nvfp4_patches`` (pure).

Its first instruction puts the stop handling in place (:mod:`interrupts`: SIGTERM and SIGHUP
as Ctrl-C); only then is the command line imported (~0.1 s), so Ctrl-C or ``kill`` at any
moment from here on ends the process with one line and exit 130, never a traceback. The
interpreter's own start (a few milliseconds before this module runs) is Python's.
"""

from __future__ import annotations

import sys


def main() -> int:
    status = _command()
    # Once a KeyboardInterrupt has left code that Python runs from a string (exec or eval of
    # text: dataclasses and namedtuple build their methods that way while modules import),
    # CPython notes it as uncaught, even when a caller catches it, and ends a ``python -m``
    # process by SIGINT whatever it returns: a stop there printed "interrupted" and then
    # ended the process by SIGINT (status -2 to a parent) instead of exit 130. Running an
    # empty string clears that note.
    exec("")
    return status


def _command() -> int:
    try:
        from sglang_nvfp4_patches.interrupts import stop_requests_as_interrupt

        with stop_requests_as_interrupt():
            from sglang_nvfp4_patches.cli import main as command_line

            return command_line()
    except KeyboardInterrupt:  # before the command line's own handling was in place
        return _interrupted()
    except Exception as error:  # a stop that an extension's import turned into another error
        from sglang_nvfp4_patches.interrupts import caused_by_interrupt

        if caused_by_interrupt(error):
            return _interrupted()
        raise


def _interrupted() -> int:
    from sglang_nvfp4_patches.errors import EXIT_INTERRUPTED
    from sglang_nvfp4_patches.interrupts import INTERRUPTED

    print(INTERRUPTED, file=sys.stderr)
    return EXIT_INTERRUPTED
