"""The ``verify`` command: each patch's checks in a fresh process, all at once, one line per
check. Each child runs with every patch on (``..._UNTESTED=apply``, no ``..._DISABLE`` nor
``..._FORCE``). A child that could not run its checks is ``NOT RUN``, not a failed contract
(exit :data:`~sglang_nvfp4_patches.errors.EXIT_ENVIRONMENT`, not 1).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from sglang_nvfp4_patches.check_result import CheckResult, Outcome
from sglang_nvfp4_patches.errors import EXIT_ENVIRONMENT, EXIT_FAILED, EXIT_OK
from sglang_nvfp4_patches.interrupts import stop_requests_deferred
from sglang_nvfp4_patches.patches import PATCHES
from sglang_nvfp4_patches.progress import announce
from sglang_nvfp4_patches.settings import DISABLE_ENV, FORCE_ENV, UNTESTED_APPLY, UNTESTED_ENV
from sglang_nvfp4_patches.supported_releases import is_tested, sglang_version, untested_phrase

CHILD_MODULE = "sglang_nvfp4_patches.verify.child"
CHILD_TIMEOUT_S = 600
# Measured on 2 cores (docs/commands.md#verify): 30 s idle; 35-72 s with other work on them.
DURATION = "about 100 s on 2 idle cores, about 3 minutes with both kept busy by other work"
_STOP_WAIT_S = 10.0  # between SIGTERM and SIGKILL for a child when verify is interrupted


def child_environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in (DISABLE_ENV, FORCE_ENV)}
    return {**env, UNTESTED_ENV: UNTESTED_APPLY}


@dataclass
class Checked:
    """What the children reported: every check's result, and the SGLang each imported."""

    results: list[CheckResult] = field(default_factory=list)
    imported: dict[str, str] = field(default_factory=dict)  # version and file, when known


def _collect(group: str, process: subprocess.Popen[str], out: Path, into: Checked) -> None:
    try:
        _, stderr = process.communicate(timeout=CHILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        _, stderr = process.communicate()
    if out.is_file():
        document = json.loads(out.read_text("utf-8"))
        into.results.extend(CheckResult.from_dict(item) for item in document["results"])
        into.imported = into.imported or document["sglang"]
        announce(f"verify: {group} done")
        return
    lines = stderr.strip().splitlines()
    if process.returncode == EXIT_ENVIRONMENT and lines:
        why = lines[-1]
    else:
        tail = " | ".join(lines[-3:]) or "no output"
        why = f"the check process exited {process.returncode} before reporting: {tail}"
    into.results.append(CheckResult(group, "checks", Outcome.NOT_RUN, why))


def _stop(processes: list[subprocess.Popen[str]]) -> None:
    """End every child still running (SIGTERM, then SIGKILL) and reap it."""
    for process in processes:
        if process.poll() is None:
            process.terminate()
    for process in processes:
        try:
            process.wait(timeout=_STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def run_all() -> Checked:
    """Each patch's checks, each in a fresh interpreter, side by side (stopped if interrupted)."""
    checked = Checked()
    with contextlib.ExitStack() as scratch_removed:
        # A stop landing inside the making of the directory, or inside Popen (the child started,
        # its Popen not yet ours to stop), takes effect once it is ours to remove or to stop.
        with stop_requests_deferred():
            scratch = scratch_removed.enter_context(
                tempfile.TemporaryDirectory(prefix="nvfp4-verify-")
            )
        # What the children leave in their TMPDIR (CuTe DSL's cache) goes with ours.
        children_tmp = Path(scratch, "tmp")
        children_tmp.mkdir()
        env = {**child_environment(), "TMPDIR": str(children_tmp)}
        started: dict[str, tuple[subprocess.Popen[str], Path]] = {}
        try:
            for group in (patch.name for patch in PATCHES):
                out = Path(scratch, f"{group}.json")
                with stop_requests_deferred():
                    process = subprocess.Popen(
                        [sys.executable, "-m", CHILD_MODULE, group, str(out)],
                        env=env,
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.PIPE,
                        text=True,
                    )
                    started[group] = (process, out)
            for group, (process, out) in started.items():
                _collect(group, process, out, checked)
        finally:
            _stop([process for process, _ in started.values()])
    return checked


def sglang_line(imported: dict[str, str], metadata: str) -> str:
    """The SGLang the checks ran on (its file named where the metadata says another version)."""
    version = imported.get("version")
    if version is None:
        return f"SGLang {metadata} (package metadata; not imported)"
    if version == metadata:
        return f"SGLang {version}"
    return f"SGLang {version} (imported from {imported['file']}; package metadata says {metadata})"


def summary(
    results: list[CheckResult], version: str, seconds: float, imported: dict[str, str] | None = None
) -> str:
    counts = {outcome: sum(r.outcome is outcome for r in results) for outcome in Outcome}
    shown = (imported or {}).get("version", version)
    release = "tested" if is_tested(shown) else f"untested: {untested_phrase(shown)}"
    not_run = counts[Outcome.NOT_RUN]
    could_not = f", {not_run} could not run" if not_run else ""
    return (
        f"verify: {counts[Outcome.HELD]} held, {counts[Outcome.FAILED]} failed, "
        f"{counts[Outcome.NOT_APPLICABLE]} not applicable{could_not} on "
        f"{sglang_line(imported or {}, version)} ({release}; {seconds:.0f} s)"
    )


def exit_status(results: list[CheckResult]) -> int:
    """1 where a contract does not hold; else EXIT_ENVIRONMENT where a group did not run; else 0."""
    if any(result.outcome is Outcome.FAILED for result in results):
        return EXIT_FAILED
    if any(result.outcome is Outcome.NOT_RUN for result in results):
        return EXIT_ENVIRONMENT
    return EXIT_OK


def run_verify(args: argparse.Namespace) -> int:
    """One line per check, then the summary; :func:`exit_status`."""
    started = time.monotonic()
    metadata = sglang_version()
    announce(
        f"verify: checking {len(PATCHES)} patches' contracts on SGLang {metadata} in "
        f"{len(PATCHES)} fresh processes ({DURATION}) ..."
    )
    checked = run_all()
    results = checked.results
    version = checked.imported.get("version", metadata)
    if args.json:
        for result in results:
            print(json.dumps({"sglang": version, **result.as_dict()}))
    else:
        for result in results:
            print(result.line())
        print(summary(results, metadata, time.monotonic() - started, checked.imported))
    return exit_status(results)
