"""``accuracy ab``: start a server per side (A, then B), ask both the same questions, compare.

A side's model path, flags and launcher are run settings, so a rerun cannot mix configurations.
Each server runs in a session and process group of its own, which keeps a terminal Ctrl-C to
this tool; stopping it stops the whole group: SIGINT, then SIGKILL.
"""

from __future__ import annotations

import contextlib
import dataclasses
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
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from sglang_nvfp4_patches.accuracy.compare import (
    Comparison,
    LoadedRun,
    compare_runs,
    run_from_document,
)
from sglang_nvfp4_patches.accuracy.dataset import EvalItem
from sglang_nvfp4_patches.accuracy.errors import ConfigError, ResumeError, RunFileError, ServerError
from sglang_nvfp4_patches.accuracy.report import run_notes, run_summary
from sglang_nvfp4_patches.accuracy.run import RunConfig, plan_resume, run_accuracy
from sglang_nvfp4_patches.accuracy.store import ensure_output_dir, run_file_lock
from sglang_nvfp4_patches.interrupts import stop_requests_deferred, stop_requests_held

DEFAULT_LAUNCHER: tuple[str, ...] = (sys.executable, "-m", "sglang.launch_server")
HOST = "127.0.0.1"
LOG_TAIL_LINES = 40
_POLL_S = 0.25
_KILL_WAIT_S = 10.0
_BANNER = re.compile(r"^===== .*: accuracy ab starts ")


@dataclass(frozen=True)
class AbConfig:
    """Everything ``accuracy ab`` needs; ``questions`` carries the run options of both sides."""

    model_path: str
    sides: Mapping[str, tuple[str, ...]]  # server flags of A (reference), then B (candidate)
    out_dir: Path
    launcher: tuple[str, ...]
    startup_timeout_s: float
    stop_grace_s: float
    alpha: float
    questions: RunConfig

    def run_file(self, side: str) -> Path:
        return self.out_dir / f"{side}.json"

    def side_config(self, side: str, base_url: str | None = None) -> RunConfig:
        """The side's ``run`` settings; ``base_url`` only matters once its server is up."""
        return dataclasses.replace(
            self.questions,
            base_url=base_url or self.questions.base_url,
            out=self.run_file(side),
            server={
                "model_path": self.model_path,
                "args": shlex.join(self.sides[side]),
                "launcher": shlex.join(self.launcher),
            },
        )


Say = Callable[[str], None]  # receives one line of text


def run_ab(config: AbConfig, say: Say, tick: Say) -> Comparison:
    """Both sides, then the comparison; ``say`` gets status lines, ``tick`` health-wait text."""
    ensure_output_dir(config.out_dir, "--out-dir")
    items = config.questions.load_items()
    with contextlib.ExitStack() as locks:
        for side in config.sides:
            locks.enter_context(run_file_lock(config.run_file(side), "--out-dir"))
        for side in config.sides:  # refuse a mismatched resume before any server starts
            try:
                plan_resume(config.side_config(side), items)
            except (ResumeError, RunFileError) as exc:
                raise type(exc)(f"side {side}: {exc}") from None
        a, b = (_run_side(config, side, items, say, tick) for side in config.sides)
    return compare_runs(a, b, alpha=config.alpha)


def _run_side(
    config: AbConfig, side: str, items: Sequence[EvalItem], say: Say, tick: Say
) -> LoadedRun:
    """The side's answers to ``items``; its server is started only when some are missing."""
    out = config.run_file(side)

    def note(line: str) -> None:
        say(f"side {side}: {line}")

    if not plan_resume(config.side_config(side), items).todo:
        outcome = run_accuracy(config.side_config(side), items, note)  # asks nothing
        note(f"{out} already answers all {len(items)} questions; server not started")
        notes = run_notes(outcome)
    else:
        port = free_port()
        command = [*config.launcher, "--model-path", config.model_path, "--host", HOST]
        command += ["--port", str(port), *config.sides[side]]
        log = config.out_dir / f"{side}.server.log"
        note(f"starting {shlex.join(command)}")
        note(f"server log {log}")
        with ServerProcess.running(command, port, log, config.stop_grace_s) as server:
            note(f"waiting for {server.base_url}/health ({config.startup_timeout_s:g} s)")
            try:
                ready_s = server.wait_healthy(
                    config.startup_timeout_s,
                    lambda elapsed: tick(
                        f"side {side}: waiting for /health ... {elapsed:.0f} s of "
                        f"{config.startup_timeout_s:g} s"
                    ),
                )
            except ServerError as exc:
                raise ServerError(f"side {side}: {exc}", exc.log) from None
            note(f"server ready after {ready_s:.1f} s")
            outcome = run_accuracy(config.side_config(side, server.base_url), items, note)
            if outcome.interrupted or outcome.run is None:
                raise KeyboardInterrupt
            notes = run_notes(outcome)
            if outcome.exit_code:
                message = "the server did not answer every question:\n" + "\n".join(notes)
                raise ServerError(f"side {side}: {message}", log)
        note(f"{run_summary(outcome.run)}; server stopped")
    for line in notes:
        note(line)
    if outcome.run is None:  # only an interrupted run has no document
        raise KeyboardInterrupt
    return run_from_document(str(out), outcome.run)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


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


@dataclass
class ServerProcess:
    """``with ServerProcess.running(cmd, port, log, grace_s) as server:``."""

    proc: subprocess.Popen[bytes]
    port: int
    log: Path
    grace_s: float

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
