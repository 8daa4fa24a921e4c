"""Set an attribute or environment variables for one block and put them back (the CPU
simulation's only way to stand in for what needs a GPU; usable outside pytest)."""

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


def _sglang_modules() -> list[Any]:
    return [module for name, module in list(sys.modules.items()) if name.startswith("sglang")]


@contextlib.contextmanager
def rebound_in_sglang(
    owner: str, fakes_for_all: Mapping[str, Callable[..., Any]]
) -> Iterator[None]:
    """Every SGLang module's binding of each function of module ``owner`` named in
    ``fakes_for_all`` (that this release has) is the fake for the block (SGLang imports such
    functions by name into many modules)."""
    source = importlib.import_module(owner)
    originals = {name: getattr(source, name) for name in fakes_for_all if hasattr(source, name)}
    fakes = {name: fake for name, fake in fakes_for_all.items() if name in originals}
    for module in _sglang_modules():
        for name, original in originals.items():
            if getattr(module, name, None) is original:
                setattr(module, name, fakes[name])
    try:
        yield
    finally:
        # Modules first imported inside the block copied a fake with `from X import Y`:
        # every module holding one gets the original back, not only those seen on entry.
        for module in _sglang_modules():
            for name, fake in fakes.items():
                if getattr(module, name, None) is fake:
                    setattr(module, name, originals[name])
