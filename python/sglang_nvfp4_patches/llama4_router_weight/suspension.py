"""``explain``'s unpatched column in a process where the patch is wired: inside
:func:`suspended` every hook of the patch hands SGLang's own function its call unchanged."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

_suspended: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "llama4_router_weight_suspended", default=False
)


@contextlib.contextmanager
def suspended() -> Iterator[None]:
    token = _suspended.set(True)
    try:
        yield
    finally:
        _suspended.reset(token)


def is_suspended() -> bool:
    return _suspended.get()
