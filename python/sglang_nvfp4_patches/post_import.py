"""Run a callback right after a module is imported, or now if it already was: plugin load
(in every process, the launcher included) imports nothing of SGLang just to patch it.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import logging
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

ModuleCallback = Callable[[ModuleType], None]
logger = logging.getLogger("sglang_nvfp4_patches")

_pending: dict[str, list[ModuleCallback]] = {}
_lock = threading.RLock()


class _CallbackLoader(importlib.abc.Loader):
    """Delegates to the real loader, then runs the callbacks on the fresh module."""

    def __init__(self, loader: importlib.abc.Loader, fullname: str) -> None:
        self._loader = loader
        self._fullname = fullname

    def __getattr__(self, name: str) -> object:
        # get_source, get_filename, resource readers...: inspect and linecache need them.
        return getattr(self._loader, name)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        with _lock:
            callbacks = _pending.pop(self._fullname, [])
        for callback in callbacks:
            _run_safely(callback, module)


class _PostImportFinder(importlib.abc.MetaPathFinder):
    def __init__(self) -> None:
        self._searching: set[str] = set()

    def find_spec(
        self, fullname: str, path: object = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in _pending or fullname in self._searching:
            return None
        self._searching.add(fullname)
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self._searching.discard(fullname)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _CallbackLoader(spec.loader, fullname)
        return spec


_finder = _PostImportFinder()


def _run_safely(callback: ModuleCallback, module: ModuleType) -> None:
    """A failing patch must never break SGLang's own import: log it and go on."""
    try:
        callback(module)
    except Exception:
        logger.exception(
            "sglang-nvfp4-patches: %s failed on %s; that module is left as SGLang made it",
            getattr(callback, "__qualname__", callback),
            module.__name__,
        )


def when_imported(module_name: str, callback: ModuleCallback) -> None:
    """Call ``callback(module)`` once ``module_name`` is imported (now, if it already is)."""
    module = sys.modules.get(module_name)
    if module is not None:
        _run_safely(callback, module)
        return
    with _lock:
        _pending.setdefault(module_name, []).append(callback)
        if _finder not in sys.meta_path:
            sys.meta_path.insert(0, _finder)


def module_exists(name: str) -> bool:
    """Look for the module's file without importing its parent packages (seconds of torch)."""
    import sglang

    relative = Path(*name.split(".")[1:])
    return any(
        (Path(root) / relative).with_suffix(".py").is_file() or (Path(root) / relative).is_dir()
        for root in sglang.__path__
    )
