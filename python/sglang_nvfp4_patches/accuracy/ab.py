"""``accuracy ab``: start a server per side, ask both the same questions, compare.

Side A, then side B, one after the other on the same GPU: start the server with the side's
flags, wait for ``/health``, ask the questions exactly as ``accuracy run`` does (same run
files, same resume), stop the server's whole process group, then pair the two runs with
McNemar's test. The side's model path, flags and launcher are part of its run settings, so a
rerun with other flags or another launcher cannot add answers to a run of another
configuration.
"""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from sglang_nvfp4_patches.accuracy.compare import Comparison, compare_runs, load_run
from sglang_nvfp4_patches.accuracy.dataset import EvalItem
from sglang_nvfp4_patches.accuracy.errors import ResumeError, ServerError
from sglang_nvfp4_patches.accuracy.report import run_notes, run_summary
from sglang_nvfp4_patches.accuracy.run import (
    RunConfig,
    is_finished,
    run_accuracy,
    stored_answers,
)
from sglang_nvfp4_patches.accuracy.server import ServerProcess, free_port, server_command
from sglang_nvfp4_patches.accuracy.store import ensure_output_dir


@dataclass(frozen=True)
class Side:
    """One configuration under test: ``A`` (reference) or ``B`` (candidate)."""

    name: str
    args: tuple[str, ...]


@dataclass(frozen=True)
class AbConfig:
    """Everything ``accuracy ab`` needs; ``questions`` carries the run options (its
    ``base_url`` and ``out`` are replaced per side)."""

    model_path: str
    sides: tuple[Side, Side]
    out_dir: Path
    launcher: tuple[str, ...]
    startup_timeout_s: float
    stop_grace_s: float
    alpha: float
    questions: RunConfig

    def run_file(self, side: Side) -> Path:
        return self.out_dir / f"{side.name}.json"

    def server_log(self, side: Side) -> Path:
        return self.out_dir / f"{side.name}.server.log"

    def side_config(self, side: Side, base_url: str | None = None) -> RunConfig:
        """The side's ``run`` settings; ``base_url`` only matters once its server is up."""
        return dataclasses.replace(
            self.questions,
            base_url=base_url or self.questions.base_url,
            out=self.run_file(side),
            server={
                "model_path": self.model_path,
                "args": shlex.join(side.args),
                "launcher": shlex.join(self.launcher),
            },
        )


Say = Callable[[str], None]  # receives one line of text


def run_ab(config: AbConfig, say: Say, tick: Say) -> Comparison:
    """Both sides, then the comparison. ``say`` gets status lines, ``tick`` the health-wait
    progress text. Raises AccuracyError (bad input), ServerError, KeyboardInterrupt."""
    ensure_output_dir(config.out_dir, "--out-dir")
    items = config.questions.load_items()
    # Refuse a mismatched resume of either side before any server starts.
    for side in config.sides:
        try:
            stored_answers(config.side_config(side), items)
        except ResumeError as exc:
            raise ResumeError(f"side {side.name}: {exc}") from None
    for side in config.sides:
        _run_side(config, side, items, say, tick)
    a, b = (load_run(config.run_file(side)) for side in config.sides)
    return compare_runs(a, b, alpha=config.alpha)


def _run_side(
    config: AbConfig,
    side: Side,
    items: Sequence[EvalItem],
    say: Say,
    tick: Say,
) -> None:
    """Skip a finished side; otherwise start its server, ask what is missing, stop it."""
    name = side.name
    out = config.run_file(side)
    if is_finished(config.side_config(side), items):
        say(f"side {name}: {out} already answers all {len(items)} questions; server not started")
        return
    port = free_port()
    command = server_command(config.launcher, config.model_path, port, side.args)
    log = config.server_log(side)
    say(f"side {name}: starting {shlex.join(command)}")
    say(f"side {name}: server log {log}")
    with ServerProcess.start(command, port, log, config.stop_grace_s) as server:
        say(f"side {name}: waiting for {server.base_url}/health ({config.startup_timeout_s:g} s)")
        try:
            ready_s = server.wait_healthy(
                config.startup_timeout_s,
                lambda elapsed: tick(
                    f"side {name}: waiting for /health ... {elapsed:.0f} s of "
                    f"{config.startup_timeout_s:g} s"
                ),
            )
        except ServerError as exc:
            raise ServerError(f"side {name}: {exc}", exc.log) from None
        say(f"side {name}: server ready after {ready_s:.1f} s")
        outcome = run_accuracy(config.side_config(side, server.base_url), items)
        if outcome.interrupted or outcome.run is None:
            raise KeyboardInterrupt
        notes = run_notes(outcome)
        if outcome.exit_code:
            raise ServerError(
                f"side {name}: the server did not answer every question:\n" + "\n".join(notes),
                log,
            )
    say(f"side {name}: {run_summary(outcome.run)}; server stopped")
    for note in notes:
        say(f"side {name}: {note}")
