"""``accuracy ab``: start a server per side (A, then B), ask both the same questions, compare.

A side's model path, flags and launcher are run settings, so a rerun cannot mix configurations.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from sglang_nvfp4_patches.accuracy.compare import (
    Comparison,
    LoadedRun,
    compare_runs,
    run_from_document,
)
from sglang_nvfp4_patches.accuracy.dataset import EvalItem
from sglang_nvfp4_patches.accuracy.errors import ResumeError, RunFileError, ServerError
from sglang_nvfp4_patches.accuracy.report import run_notes, run_summary
from sglang_nvfp4_patches.accuracy.run import RunConfig, plan_resume, run_accuracy
from sglang_nvfp4_patches.accuracy.server import ServerProcess, free_port, server_command
from sglang_nvfp4_patches.accuracy.store import ensure_output_dir, run_file_lock


@dataclass(frozen=True)
class Side:
    """One configuration under test: ``A`` (reference) or ``B`` (candidate)."""

    name: str
    args: tuple[str, ...]


@dataclass(frozen=True)
class AbConfig:
    """Everything ``accuracy ab`` needs; ``questions`` carries the run options of both sides."""

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
                raise type(exc)(f"side {side.name}: {exc}") from None
        a, b = (_run_side(config, side, items, say, tick) for side in config.sides)
    return compare_runs(a, b, alpha=config.alpha)


def _run_side(
    config: AbConfig,
    side: Side,
    items: Sequence[EvalItem],
    say: Say,
    tick: Say,
) -> LoadedRun:
    """The side's answers to ``items``; its server is started only when some are missing."""
    name = side.name
    out = config.run_file(side)

    def note(line: str) -> None:
        say(f"side {name}: {line}")

    if not plan_resume(config.side_config(side), items).todo:
        outcome = run_accuracy(config.side_config(side), items, note)  # asks nothing
        note(f"{out} already answers all {len(items)} questions; server not started")
        notes = run_notes(outcome)
    else:
        port = free_port()
        command = server_command(config.launcher, config.model_path, port, side.args)
        log = config.out_dir / f"{side.name}.server.log"
        note(f"starting {shlex.join(command)}")
        note(f"server log {log}")
        with ServerProcess.running(command, port, log, config.stop_grace_s) as server:
            note(f"waiting for {server.base_url}/health ({config.startup_timeout_s:g} s)")
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
            note(f"server ready after {ready_s:.1f} s")
            outcome = run_accuracy(config.side_config(side, server.base_url), items, note)
            if outcome.interrupted or outcome.run is None:
                raise KeyboardInterrupt
            notes = run_notes(outcome)
            if outcome.exit_code:
                message = "the server did not answer every question:\n" + "\n".join(notes)
                raise ServerError(f"side {name}: {message}", log)
        note(f"{run_summary(outcome.run)}; server stopped")
    for line in notes:
        note(line)
    if outcome.run is None:  # only an interrupted run has no document
        raise KeyboardInterrupt
    return run_from_document(str(out), outcome.run)
