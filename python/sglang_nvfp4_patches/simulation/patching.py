"""Set an attribute or environment variables for one block and put them back (the CPU
simulation's only way to stand in for a GPU; usable outside pytest)."""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

_MISSING = object()


@contextlib.contextmanager
def attribute(owner: Any, name: str, value: Any) -> Iterator[None]:
    """``owner.name = value`` inside the block; the old value (or its absence) afterwards."""
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
def environ_unset(names: Iterable[str]) -> Iterator[None]:
    """The block starts without these variables; its changes to them are undone."""
    saved = {name: os.environ.pop(name, None) for name in names}
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _rebind(swaps: Mapping[str, tuple[Any, Any]]) -> None:
    """In every SGLang module loaded, each name bound to the first of its pair is rebound to
    the second."""
    for module_name, module in list(sys.modules.items()):
        namespace = getattr(module, "__dict__", {}) if module_name.startswith("sglang") else {}
        for name, (old, new) in swaps.items():
            if namespace.get(name) is old:
                setattr(module, name, new)


@contextlib.contextmanager
def rebound_in_sglang(
    owner: str, fakes_for_all: Mapping[str, Callable[..., Any]]
) -> Iterator[None]:
    """Each SGLang module's binding of ``owner``'s functions in ``fakes_for_all`` is the fake."""
    source = importlib.import_module(owner)
    swaps = {n: (getattr(source, n), f) for n, f in fakes_for_all.items() if hasattr(source, n)}
    _rebind(swaps)
    try:
        yield
    finally:
        # Modules first imported in the block may have copied a fake: they are put back too.
        _rebind({name: (fake, original) for name, (original, fake) in swaps.items()})
