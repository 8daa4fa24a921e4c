"""A patch's state as ``doctor`` reports it, why a patch cannot be wired, and the one ERROR
that says so (pure)."""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass

from sglang_nvfp4_patches.supported_releases import sglang_version


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
