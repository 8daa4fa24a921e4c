"""The real-Ray jobs of ``test_llama4_ray_actors.py``, started in the background as soon as the
session knows it will need them (``integration/conftest.py``), so Ray's start-up and the
workers' SGLang imports run on the core the in-process tests leave idle."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from support import SCRIPTS

RUNNER = SCRIPTS / "ray_jobs_runner.py"
_running: subprocess.Popen[str] | None = None
_jobs: dict[str, Any] = {}


def start(jobs: dict[str, Any]) -> None:
    """Start the jobs (once per session)."""
    global _running
    if _running is None:
        _jobs.update(jobs)
        _running = subprocess.Popen(
            [sys.executable, str(RUNNER), json.dumps(jobs)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )


def results(jobs: dict[str, Any]) -> dict[str, Any]:
    """Each job's outcome, waiting for them (started now if nothing started them)."""
    start(jobs)
    assert _running is not None and _jobs == jobs
    stdout, stderr = _running.communicate(timeout=900)
    lines = [x for x in stdout.splitlines() if x.startswith("JOBS ")]
    assert _running.returncode == 0 and len(lines) == 1, stderr[-3000:]
    return json.loads(lines[0][len("JOBS ") :])
