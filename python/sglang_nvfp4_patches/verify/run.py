"""The ``verify`` command: each patch's checks in a fresh process, all at once, one line per
check.

Each child runs with every patch switched on: ``SGLANG_NVFP4_PATCHES_UNTESTED=apply`` (so
an untested release is checked as it would be served with the opt-in), and neither
``SGLANG_NVFP4_PATCHES_DISABLE`` nor ``SGLANG_NVFP4_PATCHES_FORCE``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sglang_nvfp4_patches.errors import EXIT_FAILED, EXIT_OK
from sglang_nvfp4_patches.patches import PATCHES
from sglang_nvfp4_patches.settings import DISABLE_ENV, FORCE_ENV, UNTESTED_APPLY, UNTESTED_ENV
from sglang_nvfp4_patches.status import sglang_version
from sglang_nvfp4_patches.supported_releases import is_tested, untested_phrase
from sglang_nvfp4_patches.verify.result import CheckResult, Outcome

CHILD_TIMEOUT_S = 600


def child_environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in (DISABLE_ENV, FORCE_ENV)}
    env[UNTESTED_ENV] = UNTESTED_APPLY
    return env


def _collect(group: str, process: subprocess.Popen[str], out: Path) -> list[CheckResult]:
    try:
        _, stderr = process.communicate(timeout=CHILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        _, stderr = process.communicate()
    if out.is_file():
        return [CheckResult.from_dict(item) for item in json.loads(out.read_text("utf-8"))]
    tail = " | ".join(stderr.strip().splitlines()[-3:]) or "no output"
    return [
        CheckResult(
            group,
            "checks ran",
            Outcome.FAILED,
            f"the check process exited {process.returncode} before reporting: {tail}",
        )
    ]


def run_all() -> list[CheckResult]:
    """Each patch's checks, each in a fresh interpreter, side by side."""
    with tempfile.TemporaryDirectory(prefix="nvfp4-verify-") as scratch:
        started = {}
        for group in (patch.name for patch in PATCHES):
            out = Path(scratch, f"{group}.json")
            started[group] = (
                subprocess.Popen(
                    [sys.executable, "-m", "sglang_nvfp4_patches.verify.child", group, str(out)],
                    env=child_environment(),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    text=True,
                ),
                out,
            )
        return [r for group, (proc, out) in started.items() for r in _collect(group, proc, out)]


def summary(results: list[CheckResult], version: str, seconds: float) -> str:
    counts = {outcome: sum(r.outcome is outcome for r in results) for outcome in Outcome}
    release = "tested" if is_tested(version) else f"untested: {untested_phrase(version)}"
    return (
        f"verify: {counts[Outcome.HELD]} held, {counts[Outcome.FAILED]} failed, "
        f"{counts[Outcome.NOT_APPLICABLE]} not applicable on SGLang {version} ({release}; "
        f"{seconds:.0f} s)"
    )


def run_verify(args: argparse.Namespace) -> int:
    """Exit 0 only when every check holds (not applicable counts as nothing to break)."""
    started = time.monotonic()
    results = run_all()
    version = sglang_version()
    if args.json:
        for result in results:
            print(json.dumps({"sglang": version, **result.as_dict()}))
    else:
        for result in results:
            print(result.line())
        print(summary(results, version, time.monotonic() - started))
    failed = any(result.outcome is Outcome.FAILED for result in results)
    return EXIT_FAILED if failed else EXIT_OK
