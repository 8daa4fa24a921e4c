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


# Per owner module: the SGLang modules already looked at (each once per process), and those
# that bind one of its functions (by function name).
_scanned: dict[str, set[str]] = {}
_holders: dict[tuple[str, str], list[Any]] = {}
_modules_seen: dict[str, int] = {}  # per owner: how many modules Python had at its last look


def _holders_of(owner: str, originals: Mapping[str, Any]) -> dict[str, list[Any]]:
    """Every SGLang module that binds each of ``originals`` (by name) under that name."""
    scanned = _scanned.setdefault(owner, set())
    if _modules_seen.get(owner) != len(sys.modules):  # modules come, they are not dropped
        _modules_seen[owner] = len(sys.modules)
        for name, module in list(sys.modules.items()):
            if name in scanned or not name.startswith("sglang"):
                continue
            scanned.add(name)
            namespace = getattr(module, "__dict__", {})
            for function, original in originals.items():
                if namespace.get(function) is original:
                    _holders.setdefault((owner, function), []).append(module)
    return {function: _holders.get((owner, function), []) for function in originals}


@contextlib.contextmanager
def rebound_in_sglang(
    owner: str, fakes_for_all: Mapping[str, Callable[..., Any]]
) -> Iterator[None]:
    """Each SGLang module's binding of ``owner``'s functions in ``fakes_for_all`` is the fake."""
    source = importlib.import_module(owner)
    originals = {name: getattr(source, name) for name in fakes_for_all if hasattr(source, name)}
    fakes = {name: fake for name, fake in fakes_for_all.items() if name in originals}
    for function, modules in _holders_of(owner, originals).items():
        for module in modules:
            if vars(module).get(function) is originals[function]:
                setattr(module, function, fakes[function])
    try:
        yield
    finally:
        # Modules first imported in the block may have copied a fake: they are holders too.
        for function, modules in _holders_of(owner, fakes).items():
            for module in modules:
                if vars(module).get(function) is fakes[function]:
                    setattr(module, function, originals[function])
