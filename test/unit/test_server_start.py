"""A stop request while ``accuracy ab`` starts a server never leaves that server running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from accuracy_support.processes import is_running
from sglang_nvfp4_patches.accuracy import ab as server_module


def test_ctrl_c_while_the_server_starts_stops_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once a Ctrl-C landing while Popen waited for the exec left the server running (CI)."""
    real_popen = subprocess.Popen
    started: list[int] = []

    def popen_then_ctrl_c(*args: object, **kwargs: object) -> subprocess.Popen[bytes]:
        proc = real_popen(*args, **kwargs)  # type: ignore[call-overload]
        started.append(proc.pid)
        os.kill(os.getpid(), signal.SIGINT)  # arrives before Popen returns to the caller
        return proc

    monkeypatch.setattr(server_module.subprocess, "Popen", popen_then_ctrl_c)
    command = [sys.executable, "-c", "import time; time.sleep(120)"]
    body_ran = False
    try:
        with (
            pytest.raises(KeyboardInterrupt),
            server_module.ServerProcess.running(command, 1, tmp_path / "A.log", grace_s=5),
        ):
            body_ran = True
    finally:
        leftover = [pid for pid in started if is_running(pid)]
        for pid in leftover:
            os.kill(pid, signal.SIGKILL)
    assert started and leftover == [] and not body_ran
