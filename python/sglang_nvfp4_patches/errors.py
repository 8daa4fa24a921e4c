"""The user-error root and every process exit status of the command line (pure): bad input
is a :class:`UsageError` (one ``error:`` line, :data:`EXIT_USAGE`); any other exception is a
bug of ours (one ``internal error:`` line, :data:`EXIT_INTERNAL`), never read as a verdict.
"""

from __future__ import annotations

import errno
import json
import traceback
from pathlib import Path
from typing import Any

_OURS = str(Path(__file__).resolve().parent)

# The exit statuses of every command; each has one meaning.
EXIT_OK = 0
EXIT_FAILED = 1  # the verdict is "worse" (``accuracy ab``/``compare``), or a patch failed
EXIT_USAGE = 2  # bad input: a UsageError, or argparse's own complaint (it exits 2 itself)
EXIT_SERVER = 3  # ``accuracy run``/``ab``: the server did not answer every question, or start
# The machine kept the command from running or writing its answer (stdout closed or full, a
# full disk, SGLang or torch failing to import, ``verify``'s checks unable to run): EX_OSERR.
EXIT_ENVIRONMENT = 71
EXIT_INTERNAL = 70  # a bug of ours (its traceback saved to a file): EX_SOFTWARE of sysexits.h
EXIT_INTERRUPTED = 130  # Ctrl-C, SIGTERM or SIGHUP before the status is fixed: 128 + SIGINT
EXIT_BROKEN_PIPE = 141  # the reader of stdout (``| head``) left early: 128 + SIGPIPE


class LaunchRefused(ValueError):
    """A patch refuses a launch whose MoE layer would fail, before the weights load, naming
    what works (SGLang reports a ValueError from resolution as bad arguments)."""


class UsageError(ValueError):
    """Bad input the user can fix; the message says what was wrong and what to do."""

    def cli_message(self) -> str:
        """What the CLI prints after ``error:``: the message on one line."""
        return " ".join(str(self).split())


class EnvironmentProblem(Exception):
    """The machine keeps the command from running or writing its answer; the message says why."""


def environment_cause(error: BaseException) -> str | None:
    """Why ``error`` is the environment's doing, or None (then it is a bug of ours): a module
    not ours is missing, has a SyntaxError, or raised while its import-time code ran (the
    innermost frame outside this package too: a broken SGLang, torch without a HOME)."""
    if isinstance(error, ModuleNotFoundError) and not (error.name or "").startswith(
        "sglang_nvfp4_patches"
    ):
        return f"a module it needs is missing ({error})"
    if isinstance(error, SyntaxError) and error.filename:
        if error.filename.startswith(("<", _OURS)):
            return None
        return (
            f"importing {error.filename} failed with SyntaxError: {error.msg} (at "
            f"{error.filename}:{error.lineno})"
        )
    frames = traceback.extract_tb(error.__traceback__)
    innermost = next((f for f in reversed(frames) if not f.filename.startswith("<")), None)
    if innermost is None or innermost.filename.startswith(_OURS):
        return None
    theirs = (f for f in frames if not f.filename.startswith(("<", _OURS)))
    imported = next((f for f in theirs if f.name == "<module>"), None)
    if imported is None:
        return None
    summary = " ".join(f"{type(error).__name__}: {error}".split())
    return (
        f"importing {imported.filename} failed with {summary} (at {innermost.filename}:"
        f"{innermost.lineno})"
    )


# A write the storage refused: full, over quota, a file size limit, read-only, failing.
_STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO})


def storage_cause(error: BaseException) -> str | None:
    """What the storage refused, when ``error`` is a write it refused, or None."""
    if not isinstance(error, OSError) or error.errno not in _STORAGE_ERRNOS:
        return None
    where = f" {error.filename}" if error.filename else ""
    return f"cannot write{where}: {error.strerror} ({errno.errorcode[error.errno]})"


def loads_json(text: str | bytes) -> Any:
    """``json.loads`` whose every parse failure (RecursionError too) is a ValueError."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError(
            "nested too deeply to parse (thousands of levels of arrays or objects)"
        ) from None
