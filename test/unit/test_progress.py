"""What ``doctor``, ``explain`` and ``accuracy run`` show on stderr while they work: only on
a terminal (no SGLang import: the heavy parts are stood in for)."""

from __future__ import annotations

import importlib.metadata
import io
import sys
import types

import pytest

from sglang_nvfp4_patches import progress
from sglang_nvfp4_patches.cli import main
from sglang_nvfp4_patches.explain import run as explain_run
from sglang_nvfp4_patches.patches import PATCHES
from sglang_nvfp4_patches.simulation.bundled import BUNDLED_MODELS
from sglang_nvfp4_patches.simulation.gpus import GPU_PROFILES


class Terminal(io.StringIO):
    """A stderr that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def _terminal(monkeypatch: pytest.MonkeyPatch) -> Terminal:
    """sys.stderr as a terminal, set in the test itself (pytest's capture resets it after
    fixtures)."""
    stream = Terminal()
    monkeypatch.setattr(sys, "stderr", stream)
    return stream


def test_announce_writes_only_to_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    terminal = _terminal(monkeypatch)
    progress.announce("working ...")
    assert terminal.getvalue() == "working ...\n"
    pipe = io.StringIO()
    monkeypatch.setattr(sys, "stderr", pipe)
    progress.announce("working ...")
    assert pipe.getvalue() == ""


def test_tracked_yields_every_item_and_counts_them_on_a_terminal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    terminal = _terminal(monkeypatch)
    assert list(progress.tracked(iter("abc"), 3, "row")) == ["a", "b", "c"]
    assert "3/3" in terminal.getvalue() and "row" in terminal.getvalue()


def test_tracked_is_silent_off_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    assert list(progress.tracked(range(4), 4, "row")) == [0, 1, 2, 3]
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("command", ["doctor", "explain"])
def test_doctor_and_explain_say_they_import_sglang_on_a_terminal_only(
    command: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[str] = []

    def stand_in(args: object) -> int:
        # What was on stderr when the work started (pytest's capture has no value yet).
        seen.append(getattr(sys.stderr, "getvalue", str)())
        return 0

    doctor = types.ModuleType("sglang_nvfp4_patches.doctor")
    doctor.run_doctor = stand_in  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "sglang_nvfp4_patches.doctor", doctor)
    monkeypatch.setattr(explain_run, "run_explain", stand_in)
    assert main([command]) == 0  # stderr is captured: not a terminal
    assert seen == [""] and capsys.readouterr().err == ""
    _terminal(monkeypatch)
    assert main([command]) == 0
    assert seen[1] == f"importing SGLang {importlib.metadata.version('sglang')} ...\n"


def test_the_full_explain_table_shows_its_progress_on_a_terminal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    terminal = _terminal(monkeypatch)
    rows: list[tuple[str, str]] = []

    def one_row(name: str, path: object, gpu: object, *rest: object) -> tuple[str, str]:
        rows.append((name, str(gpu)))
        return rows[-1]

    monkeypatch.setattr(explain_run, "_plugin_reports", dict)
    monkeypatch.setattr(explain_run, "server_flags", lambda words: {})
    monkeypatch.setattr(explain_run, "explain_one", one_row)
    monkeypatch.setattr(explain_run, "format_table", lambda rows, patched: "")
    args = types.SimpleNamespace(no_patches=False, model=None, gpu=None, json=False)
    assert explain_run.run_explain(args) == 0
    cells = len(BUNDLED_MODELS) * len(GPU_PROFILES)
    assert len(rows) == cells
    assert f"{cells}/{cells}" in terminal.getvalue()


def test_verify_says_it_started_on_a_terminal_only(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Once silent for 23-36 s while its check processes imported SGLang."""
    from sglang_nvfp4_patches.verify import run as verify_run

    seen: list[str] = []

    def stand_in() -> verify_run.Checked:
        seen.append(getattr(sys.stderr, "getvalue", str)())
        return verify_run.Checked()

    monkeypatch.setattr(verify_run, "run_all", stand_in)
    assert main(["verify"]) == 0  # stderr is captured: not a terminal
    assert seen == [""] and capsys.readouterr().err == ""
    _terminal(monkeypatch)
    assert main(["verify"]) == 0
    count = len(PATCHES)
    assert seen[1].startswith(
        f"verify: checking {count} patches' contracts on SGLang "
        f"{importlib.metadata.version('sglang')} in {count} fresh processes (about "
    )
