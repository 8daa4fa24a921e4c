"""The one error type every command prints as ``error: ...`` and exit status 2 (pure)."""

from __future__ import annotations

import json
from typing import Any


class UsageError(ValueError):
    """Bad input the user can fix; the message says what was wrong and what to do."""


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
