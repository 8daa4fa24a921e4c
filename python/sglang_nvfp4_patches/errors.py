"""The user-error root and every process exit status of the command line (pure).

Every "bad input the user can fix" is a :class:`UsageError` (``accuracy``'s DatasetError,
RunFileError, ... included); the top-level CLI prints it as one ``error: ...`` line on
stderr and exits :data:`EXIT_USAGE`. Any other exception is a bug of this project: the CLI
saves its traceback to a file, prints one ``internal error: ...`` line naming that file and
exits :data:`EXIT_INTERNAL`, so no bug is ever read as a verdict.
"""

from __future__ import annotations

import errno
import json
import traceback
from pathlib import Path
from typing import Any

_OURS = str(Path(__file__).resolve().parent)

# The exit statuses of ``explain``, ``doctor`` and ``accuracy {run,ab,compare}``; each has
# one meaning.
EXIT_OK = 0
# The verdict is "worse": ``accuracy ab``/``compare`` B significantly worse than A,
# ``doctor``/``explain`` a patch that failed to apply.
EXIT_FAILED = 1
# Bad input: a UsageError, or argparse's own complaint (argparse exits 2 itself).
EXIT_USAGE = 2
# ``accuracy run``/``ab``: the server did not answer every question, or a server ``ab``
# started did not come up.
EXIT_SERVER = 3
# The machine, not the input nor this project, kept the command from running or from writing
# its answer: stdout closed or full, a disk full (storage_cause), SGLang or torch failing while
# they are imported (a broken install first on PYTHONPATH, a HOME where torch cannot make its
# cache), ``verify``'s checks unable to run. 71 is EX_OSERR of BSD's sysexits.h ("operating
# system error").
EXIT_ENVIRONMENT = 71
# A bug of this project (an exception that is not a UsageError): the traceback is saved to a
# file whose path is printed. 70 is EX_SOFTWARE of BSD's sysexits.h ("internal software
# error"); it is none of the statuses above.
EXIT_INTERNAL = 70
# Ctrl-C, SIGTERM or SIGHUP (interrupts.py) until the status is fixed (console.py): 128 +
# SIGINT, as a shell reports Ctrl-C.
EXIT_INTERRUPTED = 130
# The reader of stdout (``| head``) left early: 128 + SIGPIPE, as a shell reports it.
EXIT_BROKEN_PIPE = 141


class UsageError(ValueError):
    """Bad input the user can fix; the message says what was wrong and what to do."""

    def cli_message(self) -> str:
        """What the CLI prints after ``error:``: the message with every run of whitespace
        made one space, so a refusal SGLang words over several lines stays one line."""
        return " ".join(str(self).split())


class EnvironmentProblem(Exception):
    """The machine keeps the command from running or from writing its answer; the message
    says the cause (the CLI prints it as one ``error:`` line, exit :data:`EXIT_ENVIRONMENT`)."""


def environment_cause(error: BaseException) -> str | None:
    """Why ``error`` is the environment's doing, or None (then it is ours: a bug).

    It is when a module that is not ours is missing, or when importing one failed inside
    that module's own code (a broken SGLang first on PYTHONPATH, torch unable to create its
    cache under HOME, a driver check that raises RuntimeError): any exception raised while a
    module that is not ours runs its import-time code, whose innermost frame lies outside this
    package too, or a SyntaxError in a file that is not ours.
    """
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
    """What the storage refused, when ``error`` is a write it refused (whatever wrote:
    ``accuracy``'s answer files, ``verify``'s records), or None."""
    if not isinstance(error, OSError) or error.errno not in _STORAGE_ERRNOS:
        return None
    where = f" {error.filename}" if error.filename else ""
    return f"cannot write{where}: {error.strerror} ({errno.errorcode[error.errno]})"


def loads_json(text: str | bytes) -> Any:
    """``json.loads`` whose every parse failure is a ValueError.

    The C decoder recurses per nesting level, so a file nested a few thousand levels deep
    raises RecursionError; callers that turn ValueError into one ``error:`` line then cover
    that too.
    """
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError(
            "nested too deeply to parse (thousands of levels of arrays or objects)"
        ) from None
