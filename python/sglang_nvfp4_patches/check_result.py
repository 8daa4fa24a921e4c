"""One ``verify`` check's outcome (pure: no SGLang import): what each patch's checks return
and the ``verify`` command reports, so it sits below both (as :mod:`.patch` does)."""

from __future__ import annotations

import dataclasses
import enum
import traceback
from collections.abc import Callable
from dataclasses import dataclass


class Outcome(str, enum.Enum):
    HELD = "held"
    FAILED = "FAILED"
    NOT_APPLICABLE = "n/a"  # this SGLang has nothing the check could exercise
    NOT_RUN = "NOT RUN"  # the checks could not run (SGLang cannot be imported, ...): no verdict


@dataclass(frozen=True)
class CheckResult:
    patch: str
    check: str
    outcome: Outcome
    reason: str

    def as_dict(self) -> dict[str, str]:
        return {**dataclasses.asdict(self), "outcome": self.outcome.value}

    @classmethod
    def from_dict(cls, data: dict[str, str]) -> CheckResult:
        return cls(data["patch"], data["check"], Outcome(data["outcome"]), data["reason"])

    def line(self) -> str:
        return f"{self.outcome.value:<6}  {self.patch}: {self.check}: {self.reason}"


class CheckFailed(Exception):
    """The contract does not hold; the message says how."""


class NotApplicable(Exception):
    """There is nothing on this SGLang for the check to exercise; the message says why."""


def run_check(patch: str, check: str, body: Callable[[], str]) -> CheckResult:
    """``body`` returns why the check held, or raises :class:`CheckFailed` or
    :class:`NotApplicable`; anything else it raises is a failure, named with where it arose."""
    try:
        return CheckResult(patch, check, Outcome.HELD, body())
    except CheckFailed as error:
        return CheckResult(patch, check, Outcome.FAILED, str(error))
    except NotApplicable as error:
        return CheckResult(patch, check, Outcome.NOT_APPLICABLE, str(error))
    except Exception as error:
        where = traceback.extract_tb(error.__traceback__)[-1]
        reason = f"{type(error).__name__}: {error} (at {where.filename}:{where.lineno})"
        return CheckResult(patch, check, Outcome.FAILED, reason)
