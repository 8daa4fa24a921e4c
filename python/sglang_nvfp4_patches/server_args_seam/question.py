"""What a patch asks of a launch (pure): the one ServerArgs field it may default, for which
architectures, and its answer from the launch's facts (:class:`.launch.Launch`). A patch states
only this; :mod:`.hooks` serves every question from one hook on the seam."""

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
