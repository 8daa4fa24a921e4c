"""Run in its own process, in the background of the test session: one local Ray, and two jobs
on it at once, each from its own driver process (``ray_job_probe.py``) with the runtime env
given. Prints one ``JOBS`` line of JSON: per job, the driver's ``STATE`` and its ``--use-ray``
log lines, or the error that stopped it.

``python ray_jobs_runner.py JOBS_JSON`` (``{"name": runtime_env, ...}``). Its workers inherit
this process's environment (in CI the editable install, here also PYTHONPATH).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

JOB_PROBE = str(Path(__file__).with_name("ray_job_probe.py"))


def run_jobs(jobs: dict[str, Any]) -> dict[str, Any]:
    import ray

    ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        address = ray.get_runtime_context().gcs_address
        drivers = {
            name: subprocess.Popen(
                [sys.executable, JOB_PROBE, "--address", address, "--runtime-env", json.dumps(env)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for name, env in jobs.items()
        }
        results: dict[str, Any] = {}
        for name, driver in drivers.items():
            stdout, stderr = driver.communicate(timeout=600)
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
