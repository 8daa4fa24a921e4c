"""The user-error root and every process exit status of the command line (pure).

Every "bad input the user can fix" is a :class:`UsageError` (``accuracy``'s DatasetError,
RunFileError, ... included); the top-level CLI prints it as one ``error: ...`` line on
stderr and exits :data:`EXIT_USAGE`.
"""

from __future__ import annotations

import json
from typing import Any

# The exit statuses of ``explain``, ``doctor`` and ``accuracy {run,ab,compare}``.
EXIT_OK = 0
# The check found a problem: ``accuracy run`` a question without an answer, ``accuracy ab``
# B significantly worse than A, ``doctor``/``explain`` a patch that failed to apply.
EXIT_FAILED = 1
# Bad input: a UsageError, or argparse's own complaint (argparse exits 2 itself).
EXIT_USAGE = 2
# ``accuracy ab``: a server it started did not come up or did not answer.
EXIT_SERVER = 3
# Ctrl-C (or SIGTERM during ``accuracy ab``): 128 + SIGINT, as a shell reports it.
EXIT_INTERRUPTED = 130
# The reader of stdout (``| head``) left early: 128 + SIGPIPE, as a shell reports it.
EXIT_BROKEN_PIPE = 141


class UsageError(ValueError):
    """Bad input the user can fix; the message says what was wrong and what to do."""

    def cli_message(self) -> str:
        """What the CLI prints after ``error:``: the message with every run of whitespace
        made one space, so a refusal SGLang words over several lines stays one line."""
        return " ".join(str(self).split())


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
