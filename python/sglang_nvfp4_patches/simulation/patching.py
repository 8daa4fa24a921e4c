"""Set an attribute or environment variables for one block and put them back (the CPU
simulation's only way to stand in for what needs a GPU; usable outside pytest)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from typing import Any

_MISSING = object()


@contextlib.contextmanager
def attribute(owner: Any, name: str, value: Any) -> Iterator[None]:
    """``owner.name = value`` inside the block; the old value (or its absence: an inherited
    attribute is shadowed, then uncovered again) afterwards."""
    # A slotted object has no inherited value to uncover: its own is put back.
    old = vars(owner).get(name, _MISSING) if hasattr(owner, "__dict__") else getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        if old is _MISSING:
            delattr(owner, name)
        else:
            setattr(owner, name, old)


@contextlib.contextmanager
def environ_restored(names: Iterable[str], unset: bool = False) -> Iterator[None]:
    """Whatever the block does to these environment variables is undone afterwards
    (``unset``: the block starts without them)."""
    saved = {name: os.environ.get(name) for name in names}
    if unset:
        for name in saved:
            os.environ.pop(name, None)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
