"""Run in a fresh interpreter: load plugins as SGLang does, then import SGLang's Ray engine
the way ``--use-ray`` does, and print which Ray case the plugin saw.

``--job-runtime-env JSON`` stands in for ``ray job submit``: it puts the job config Ray's job
supervisor gives its entrypoint into this process's environment first (the fork server lets a
child set only the plugin's own variables).
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import sys


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--job-runtime-env", help="runtime env of the submitted job (JSON)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO)
    if args.job_runtime_env is not None:
        os.environ["RAY_JOB_CONFIG_JSON_ENV_VAR"] = json.dumps(
            {"runtime_env": json.loads(args.job_runtime_env), "metadata": {}}
        )

    from sglang.srt.plugins import load_plugins

    load_plugins()
    from sglang_nvfp4_patches.llama4_router_weight import ray_job_check as ray_actors

    state = {"ray_imported_by_plugin": "ray" in sys.modules}  # neither loading nor doctor may
    state["doctor_note_before"] = ray_actors.doctor_note()
    state["ray_imported_by_doctor"] = "ray" in sys.modules
    importlib.import_module("sglang.srt.ray.engine")  # what --use-ray's launcher imports
    state["ray_initialized"] = sys.modules["ray"].is_initialized()
    state["doctor_note"] = ray_actors.doctor_note()
    print("STATE " + json.dumps(state))


if __name__ == "__main__":
    main()
