"""What a patch asks of a launch (pure): the one ServerArgs field it may default, for which
architectures, and its answer from the launch's facts (:class:`.launch.Launch`). A patch states
only this, with the :func:`question` decorator where the answer is defined; :mod:`.hooks`
serves every asked question from one hook on the seam."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sglang_nvfp4_patches.server_args_seam.launch import Launch


def never() -> bool:
    return False


@dataclass(frozen=True, eq=False)
class Question:
    patch: str  # the asking patch's name (its log lines)
    field: str  # the ServerArgs field it may declare
    answer: Callable[[Launch], Any]  # the value to declare, or None: SGLang's own stands
    architectures: frozenset[str] | None = None  # None: every architecture
    is_suspended: Callable[[], bool] = never  # the patch's suspension (explain's unpatched)
    # Where SGLang sets model defaults in place: asked before its adjustments, as if the
    # operator had typed the value (True), or after them, of the record they resolved (False).
    before_adjustments: bool = True
    # Checks a record resolved before plugins loaded, as the scheduler receives it (warned?).
    check_record: Callable[[Launch], bool] | None = None

    def asks_about(self, architecture: str | None) -> bool:
        return self.architectures is None or architecture in self.architectures


# Every question defined in this process, by its field: a field has one question.
REGISTERED: dict[str, Question] = {}


def register(question: Question) -> Question:
    """Keep ``question``; a second question on its field is refused (:class:`ValueError`)."""
    other = REGISTERED.get(question.field)
    if other is not None and other is not question:
        raise ValueError(
            f"[{question.patch}] asks about the ServerArgs field {question.field}, which "
            f"[{other.patch}] already asks about: a field has one question, so fold the two "
            "answers into one"
        )
    REGISTERED[question.field] = question
    return question


def question(
    patch: str,
    field: str,
    architectures: frozenset[str] | None = None,
    is_suspended: Callable[[], bool] = never,
    before_adjustments: bool = True,
    check_record: Callable[[Launch], bool] | None = None,
) -> Callable[[Callable[[Launch], Any]], Question]:
    """Register the decorated answer as ``patch``'s question on ``field``, where it is
    defined (the other arguments: :class:`Question`'s)."""

    def registered(answer: Callable[[Launch], Any]) -> Question:
        options = (architectures, is_suspended, before_adjustments, check_record)
        return register(Question(patch, field, answer, *options))

    return registered


def questions_of(patch: str) -> list[Question]:
    return [question for question in REGISTERED.values() if question.patch == patch]


def fields_asked_by(patch: str) -> frozenset[str]:
    return frozenset(question.field for question in questions_of(patch))
