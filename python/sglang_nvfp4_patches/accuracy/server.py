"""One server of ``accuracy ab``: started in its own process group, stopped with all of it.

Its own session keeps a terminal Ctrl-C to this tool, which stops the group: SIGINT, then KILL.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from sglang_nvfp4_patches.accuracy.errors import ConfigError, ServerError
from sglang_nvfp4_patches.interrupts import stop_requests_deferred, stop_requests_held

DEFAULT_LAUNCHER: tuple[str, ...] = (sys.executable, "-m", "sglang.launch_server")
# ab sets these itself; a side's own copy would start a server the tool cannot reach.
RESERVED_FLAGS: tuple[str, ...] = ("--model-path", "--host", "--port")
HOST = "127.0.0.1"
LOG_TAIL_LINES = 40
_POLL_S = 0.25
_KILL_WAIT_S = 10.0


def free_port() -> int:
    """A loopback port nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def reserved_flag(args: Sequence[str]) -> str | None:
    """The first of RESERVED_FLAGS in ``args`` (also as ``--port=N``), or None."""
    names = (arg.split("=", 1)[0] for arg in args)
    return next((name for name in names if name in RESERVED_FLAGS), None)


def server_command(
    launcher: Sequence[str], model_path: str, port: int, args: Sequence[str]
) -> list[str]:
    """``LAUNCHER --model-path M --host 127.0.0.1 --port PORT <side args>``."""
    return [*launcher, "--model-path", model_path, "--host", HOST, "--port", str(port), *args]


def log_tail(log: Path, lines: int = LOG_TAIL_LINES) -> list[str]:
    """The last ``lines`` lines of a (possibly huge) log, from its last start on."""
    try:
        with log.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 256 * 1024))
            text = handle.read().decode("utf-8", errors="replace")
    except OSError:
        return []
    tail = text.splitlines()
    starts = [number for number, line in enumerate(tail) if _BANNER.match(line)]
    return tail[starts[-1] + 1 if starts else 0 :][-lines:]


def _spawn(command: Sequence[str], log: Path) -> subprocess.Popen[bytes]:
    log.parent.mkdir(exist_ok=True)
    sigint_ignored = signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    restore_sigint = functools.partial(signal.signal, signal.SIGINT, signal.SIG_DFL)
    with log.open("ab") as handle:
        started = time.strftime("%Y-%m-%d %H:%M:%S %z")
        handle.write(f"===== {started}: accuracy ab starts {shlex.join(command)}\n".encode())
        handle.flush()
        try:
            return subprocess.Popen(
                list(command),
                stdin=subprocess.DEVNULL,
                stdout=handle,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                # ab started as a script's background job ignores SIGINT; the server, in a
                # session of its own, must still take the SIGINT that stops it cleanly.
                preexec_fn=restore_sigint if sigint_ignored else None,
            )
        except OSError as exc:
            raise ConfigError(
                f"cannot run the server command {command[0]!r}: {exc.strerror or exc}; "
                "check --launcher"
            ) from None


class ServerProcess:
    """``with ServerProcess.running(cmd, port, log, grace_s) as server:``."""

    def __init__(self, proc: subprocess.Popen[bytes], port: int, log: Path, grace_s: float):
        self.proc = proc
        self.port = port
        self.log = log
        self.grace_s = grace_s

    @classmethod
    @contextlib.contextmanager
    def running(
        cls, command: Sequence[str], port: int, log: Path, grace_s: float
    ) -> Iterator[ServerProcess]:
        """``command`` in a new session, its output appended to ``log`` after a banner, stopped
        with its group as the block ends. A stop request while it starts waits for its pid:
        once one interrupted the start and left the server running."""
        server = None
        try:
            with stop_requests_deferred():
                server = cls(_spawn(command, log), port, log, grace_s)
            yield server
        finally:
            if server is not None:
                server.stop()

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def wait_healthy(self, timeout_s: float, tick: Callable[[float], None]) -> float:
        """Seconds until ``GET /health`` answered 200 (ServerError on exit or timeout)."""
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        start = last_tick = time.monotonic()
        while True:
            elapsed = time.monotonic() - start
            code = self.proc.poll()
            if code is not None:
                raise ServerError(
                    f"the server exited with code {code} before /health answered", self.log
                )
            with (
                contextlib.suppress(urllib.error.URLError, OSError, ValueError),
                opener.open(f"{self.base_url}/health", timeout=2) as response,
            ):
                if response.status == 200:
                    return elapsed
            if elapsed >= timeout_s:
                raise ServerError(
                    f"/health on {self.base_url} did not answer 200 within {timeout_s:g} s "
                    "(--startup-timeout)",
                    self.log,
                )
            if time.monotonic() - last_tick >= 1:
                last_tick = time.monotonic()
                tick(elapsed)
            time.sleep(min(_POLL_S, max(0.0, timeout_s - elapsed)))

    def stop(self) -> None:
        """SIGINT to the group, then SIGKILL after the grace period (or a second Ctrl-C)."""
        interrupted = False
        try:
            self._end_group(signal.SIGINT, self.grace_s, 0.05)
        except KeyboardInterrupt:
            interrupted = True
        with stop_requests_held():
            self._end_group(signal.SIGKILL, _KILL_WAIT_S, 0.02)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=_KILL_WAIT_S)
        if interrupted:
            raise KeyboardInterrupt

    def _end_group(self, sig: signal.Signals, wait_s: float, poll_s: float) -> None:
        """``sig`` to the group if it is alive, then wait up to ``wait_s`` for it to end."""
        if self._group_alive():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)  # the session leader's pid is the group id
            deadline = time.monotonic() + wait_s
            while time.monotonic() < deadline and self._group_alive():
                time.sleep(poll_s)

    def _group_alive(self) -> bool:
        """Any non-zombie process of the group (an orphaned zombie may never be reaped)."""
        self.proc.poll()  # reap the leader once it exits, so it does not count as a member
        pgid = self.proc.pid
        proc = Path("/proc")
        if not proc.is_dir():
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return False
            return True
        for entry in proc.iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            # pid (comm) state ppid pgrp ...; comm may contain spaces and parentheses
            fields = stat[stat.rfind(")") + 2 :].split()
            if len(fields) > 2 and fields[2] == str(pgid) and fields[0] != "Z":
                return True
        return False


_BANNER = re.compile(r"^===== .*: accuracy ab starts ")
