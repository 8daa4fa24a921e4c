"""A patch's suspension (pure: no SGLang, no torch): inside its block, the patch's hooks hand
SGLang's own functions their calls unchanged; per context (threads and tasks do not share it)."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator


class Suspension:
    def __init__(self, name: str) -> None:
        self._flag: contextvars.ContextVar[bool] = contextvars.ContextVar(name, default=False)

    @contextlib.contextmanager
    def suspended(self) -> Iterator[None]:
        token = self._flag.set(True)
        try:
            yield
        finally:
            self._flag.reset(token)

    def active(self) -> bool:
        return self._flag.get()
