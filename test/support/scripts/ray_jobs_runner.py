"""Run in its own process, in the background of the test session: one local Ray, and two jobs
on it at once, each from its own driver process (``ray_job_probe.py``) with the runtime env
given. Prints one ``JOBS`` line of JSON: per job, the driver's ``STATE`` and its ``--use-ray``
log lines, or the error that stopped it.

``python ray_jobs_runner.py JOBS_JSON`` (``{"name": runtime_env, ...}``). Its workers inherit
this process's environment (in CI the editable install, here also PYTHONPATH).

Ray starts its workers at niceness 15. Beside a suite that keeps both cores busy at niceness 0,
such a worker gets a few per cent of a core, and its SGLang imports, seconds when it runs alone,
took over ten minutes (a CI run, 2026-12-03). The workers here run at the suite's niceness; how
Ray schedules them is not what these jobs test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

JOB_PROBE = str(Path(__file__).with_name("ray_job_probe.py"))
DRIVER_TIMEOUT_S = 600
# Under the drivers' deadline: a stuck actor is reported by its driver, with Ray's own error.
ACTOR_TIMEOUT_S = DRIVER_TIMEOUT_S - 60
WORKER_NICENESS = "RAY_worker_niceness"  # Ray's config names are case-sensitive


def run_jobs(jobs: dict[str, Any]) -> dict[str, Any]:
    import ray

    os.environ[WORKER_NICENESS] = "0"  # read by the raylet this starts, and its workers
    ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        address = ray.get_runtime_context().gcs_address
        probe = [sys.executable, JOB_PROBE, "--address", address]
        probe += ["--actor-timeout", str(ACTOR_TIMEOUT_S)]
        drivers = {
            name: subprocess.Popen(
                [*probe, "--runtime-env", json.dumps(env)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for name, env in jobs.items()
        }
        results: dict[str, Any] = {}
        deadline = time.monotonic() + DRIVER_TIMEOUT_S  # one for all: the drivers run at once
        for name, driver in drivers.items():
            try:
                stdout, stderr = driver.communicate(timeout=max(0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                driver.kill()
                _, stderr = driver.communicate()
                results[name] = {"error": f"no answer in {DRIVER_TIMEOUT_S} s: {stderr[-3000:]}"}
                continue
            states = [x for x in stdout.splitlines() if x.startswith("STATE ")]
            if driver.returncode != 0 or len(states) != 1:
                results[name] = {"error": f"exit {driver.returncode}: {stderr[-3000:]}"}
                continue
            results[name] = {
                "state": json.loads(states[0][len("STATE ") :]),
                "warnings": [x for x in stderr.splitlines() if "--use-ray" in x],
            }
        return results
    finally:
        ray.shutdown()


if __name__ == "__main__":
    print("JOBS " + json.dumps(run_jobs(json.loads(sys.argv[1]))))
