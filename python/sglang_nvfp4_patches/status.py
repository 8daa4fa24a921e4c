"""Patch states as ``doctor`` reports them, and the installed SGLang's version (pure)."""

from __future__ import annotations

import enum
import importlib.metadata
import logging
from dataclasses import dataclass


class PatchState(str, enum.Enum):
    APPLIED = "applied"
    PENDING = "pending"  # to act (or be probed) when SGLang imports its code
    ALREADY_UPSTREAM = "already upstream"
    NOT_APPLICABLE = "not applicable"
    NOT_PATCHED = "not patched"  # the bug is live here; this release is untested, no opt-in
    UNKNOWN = "unknown"  # a probe cannot tell whether the bug is live; SGLang left as it ships
    DISABLED = "disabled"
    FAILED = "failed"


@dataclass(frozen=True)
class PatchReport:
    name: str
    state: PatchState
    reason: str

    def as_dict(self) -> dict[str, str]:
        return {"status": self.state.value, "reason": self.reason}


# Set on every function this plugin installs, so a probe can tell ours from SGLang's own.
PATCHED_MARK = "__sglang_nvfp4_patches__"


class PatchUnavailable(RuntimeError):
    """The installed SGLang lacks something a patch needs; the message says what."""


def log_not_applied(logger: logging.Logger, patch: str, reason: object) -> None:
    """The one ERROR of a patch that cannot be wired, SGLang left as it was."""
    logger.error(
        "[%s] could not be applied on SGLang %s: %s. SGLang is left unchanged for this patch.",
        patch,
        sglang_version(),
        reason,
    )


def sglang_version() -> str:
    """Version of the installed SGLang, from its dist-info (cheap: ``sglang.__version__``
    imports torch). An overlay on PYTHONPATH comes first on sys.path, so its version wins."""
    return dist_version("sglang")


def dist_version(name: str) -> str:
    """An installed distribution's version, or ``not installed``."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"
