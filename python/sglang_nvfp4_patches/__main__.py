"""The process entry of the console script and of ``python -m sglang_nvfp4_patches`` (pure):
the stop handling (:mod:`interrupts`) is in place before the command line is imported, so a
stop from here on ends the process with one line and exit 130, never a traceback.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys


def main() -> int:  # never returns: os._exit
    """Run the command, then end the process at once with its status (no torch teardown); once
    the status is fixed, stop requests are blocked and change nothing."""
    status = _command()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):  # lost: the status stays
            stream.flush()
    os._exit(status)


def _command() -> int:
    try:
        from sglang_nvfp4_patches.interrupts import stop_requests_as_interrupt

        with stop_requests_as_interrupt():
            try:
                from sglang_nvfp4_patches.cli import main as command_line

                return command_line()
            except SystemExit as done:  # argparse's --help, --version and usage errors
                return int(done.code or 0)
            finally:
                signal.pthread_sigmask(signal.SIG_BLOCK, _STOPS)
    except KeyboardInterrupt:  # before the command line's own handling was in place
        return _interrupted()
    except Exception as error:  # a stop that an extension's import turned into another error
        from sglang_nvfp4_patches.interrupts import caused_by_interrupt

        if caused_by_interrupt(error):
            return _interrupted()
        raise


_STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _interrupted() -> int:
    from sglang_nvfp4_patches.errors import EXIT_INTERRUPTED
    from sglang_nvfp4_patches.interrupts import INTERRUPTED

    print(INTERRUPTED, file=sys.stderr)
    return EXIT_INTERRUPTED


if __name__ == "__main__":
    main()
