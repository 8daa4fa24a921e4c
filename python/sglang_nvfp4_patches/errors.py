"""The one error type every command prints as ``error: ...`` and exit status 2 (pure)."""

from __future__ import annotations


class UsageError(ValueError):
    """Bad input the user can fix; the message says what was wrong and what to do."""
