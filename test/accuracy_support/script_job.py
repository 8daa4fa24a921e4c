"""A command started as a script starts a background job, for the tests of stop requests."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def ignores_sigint(pid: int) -> bool:
    """Process ``pid`` ignores SIGINT (bit 2 of SigIgn in /proc/PID/status)."""
    status = Path(f"/proc/{pid}/status").read_text()
    (mask,) = (line.split()[1] for line in status.splitlines() if line[:7] == "SigIgn:")
    return bool(int(mask, 16) & (1 << (signal.SIGINT - 1)))


class ScriptJob:
    """``COMMAND`` started as a script starts a background job: ``bash -c 'COMMAND & ...
    wait $!'``. Without job control, bash starts it with SIGINT ignored (as ``nohup``,
    ``timeout`` and many service managers leave it too); :meth:`send_signal` is the
    script's ``kill $pid``. ``returncode`` is the job's exit status, as ``wait`` reports it."""

    def __init__(self, command: Sequence[str], **popen: Any) -> None:
        read, write = os.pipe()
        job = f"{shlex.join(command)} {write}>&-"
        script = f"{job} & echo $! >&{write}; exec {write}>&-; wait $!"
        passed = (write, *popen.pop("pass_fds", ()))
        self.shell = subprocess.Popen(["bash", "-c", script], pass_fds=passed, **popen)
        os.close(write)
        with os.fdopen(read) as pids:
            self.pid = int(pids.readline())

    def sigint_ignored(self, within_s: float = 5.0) -> bool:
        """The job ignores SIGINT, as bash sets it between its fork and the job's exec:
        polled for up to ``within_s``."""
        deadline = time.monotonic() + within_s
        while not ignores_sigint(self.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        return ignores_sigint(self.pid)

    def send_signal(self, sig: signal.Signals) -> None:
        """What the script's ``kill -SIG $pid`` does."""
        os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def communicate(self, timeout: float) -> tuple[Any, Any]:
        return self.shell.communicate(timeout=timeout)

    @property
    def returncode(self) -> int | None:
        return self.shell.returncode

    def poll(self) -> int | None:
        return self.shell.poll()

    def wait(self) -> int:
        return self.shell.wait()
