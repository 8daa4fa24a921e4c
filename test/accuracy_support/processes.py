"""Processes found by their command line, for tests that must see what a command left
running (Linux ``/proc``)."""

from __future__ import annotations

from pathlib import Path


def processes_naming(*texts: str) -> list[tuple[int, str]]:
    """``(pid, command line)`` of every process whose command line holds each of ``texts``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if all(text.encode() in cmdline for text in texts):
            found.append((int(entry.name), " ".join(cmdline.decode().split(chr(0)))))
    return found


def is_running(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, ended but not reaped, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return state[state.rfind(")") + 2] != "Z"
