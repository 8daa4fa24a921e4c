"""Post-import callbacks on throw-away modules (no SGLang import)."""

from __future__ import annotations

import importlib
import inspect
import sys
from pathlib import Path

import pytest

from sglang_nvfp4_patches.post_import import when_imported


@pytest.fixture
def module_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [n for n in sys.modules if n.startswith("nvfp4_probe_")]:
        del sys.modules[name]


def test_callback_runs_after_the_module_body(module_dir: Path) -> None:
    (module_dir / "nvfp4_probe_late.py").write_text("VALUE = 41\ndef f():\n    return VALUE\n")
    seen: list[int] = []

    def bump(module: object) -> None:
        seen.append(module.VALUE)
        module.VALUE = 42

    when_imported("nvfp4_probe_late", bump)
    assert seen == []  # waiting for the import
    module = importlib.import_module("nvfp4_probe_late")
    assert seen == [41]
    assert module.f() == 42
    assert "VALUE = 41" in inspect.getsource(module)  # the real loader still serves source
    del sys.modules["nvfp4_probe_late"]
    importlib.import_module("nvfp4_probe_late")  # a fresh import: the callback ran already
    assert seen == [41]


def test_callback_runs_at_once_for_an_imported_module(module_dir: Path) -> None:
    (module_dir / "nvfp4_probe_early.py").write_text("VALUE = 1\n")
    module = importlib.import_module("nvfp4_probe_early")
    seen: list[object] = []
    when_imported("nvfp4_probe_early", seen.append)
    assert seen == [module]


def test_a_callback_run_at_once_is_not_queued_for_a_later_import(module_dir: Path) -> None:
    """Once only: importing the module again (a reload, or a fresh import after it left
    ``sys.modules``) does not call it a second time."""
    (module_dir / "nvfp4_probe_once.py").write_text("VALUE = 1\n")
    module = importlib.import_module("nvfp4_probe_once")
    seen: list[object] = []
    when_imported("nvfp4_probe_once", seen.append)
    importlib.reload(module)
    del sys.modules["nvfp4_probe_once"]
    importlib.import_module("nvfp4_probe_once")
    assert seen == [module]


def test_submodule_of_a_package(module_dir: Path) -> None:
    package = module_dir / "nvfp4_probe_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "inner.py").write_text("NAME = 'inner'\n")
    seen: list[str] = []
    when_imported("nvfp4_probe_pkg.inner", lambda m: seen.append(m.NAME))
    importlib.import_module("nvfp4_probe_pkg")
    assert seen == []
    importlib.import_module("nvfp4_probe_pkg.inner")
    assert seen == ["inner"]


def test_a_failing_callback_never_breaks_the_import(
    module_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (module_dir / "nvfp4_probe_fragile.py").write_text("VALUE = 7\n")
    seen: list[int] = []

    def broken(module: object) -> None:
        raise AttributeError("no such seam")

    when_imported("nvfp4_probe_fragile", broken)
    when_imported("nvfp4_probe_fragile", lambda m: seen.append(m.VALUE))
    with caplog.at_level("ERROR", logger="sglang_nvfp4_patches"):
        module = importlib.import_module("nvfp4_probe_fragile")
    assert module.VALUE == 7 and seen == [7]
    (record,) = [r for r in caplog.records if r.levelname == "ERROR"]
    assert "broken" in record.getMessage() and "nvfp4_probe_fragile" in record.getMessage()
