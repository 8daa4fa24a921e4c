"""Which ``--use-ray`` case a Ray job's runtime env is in, and what the user is told (no SGLang
import, no Ray). Real Ray runs in ``test/integration/test_ray_actors.py``."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sglang_nvfp4_patches.llama4_router_weight.ray_job_check import (
    RayJob,
    classify,
    note_text,
    runtime_env_from_job_config,
    warning_text,
)

HOOK = "sglang.srt.plugins.load_plugins"


@pytest.mark.parametrize(
    ("runtime_env", "expected"),
    [
        (None, RayJob.NO_JOB),
        ({}, RayJob.NO_HOOK),
        ({"env_vars": {"SGLANG_PLUGINS": "nvfp4_patches"}}, RayJob.NO_HOOK),
        ({"worker_process_setup_hook": HOOK}, RayJob.HOOKED),
        # given to ray.init as a callable, the runtime env keeps only the function's name
        ({"worker_process_setup_hook": "load_plugins"}, RayJob.HOOKED),
        # only the variable Ray's workers read the hook from
        ({"env_vars": {"__RAY_WORKER_PROCESS_SETUP_HOOK_ENV_VAR": HOOK}}, RayJob.HOOKED),
        ({"worker_process_setup_hook": "my_site.setup"}, RayJob.OTHER_HOOK),
        (
            {"worker_process_setup_hook": HOOK, "env_vars": {"SGLANG_PLUGINS": "smg-servicer"}},
            RayJob.NOT_WHITELISTED,
        ),
        (
            {
                "worker_process_setup_hook": HOOK,
                "env_vars": {"SGLANG_PLUGINS": "smg-servicer, nvfp4_patches"},
            },
            RayJob.HOOKED,
        ),
    ],
)
def test_classify(runtime_env: dict[str, Any] | None, expected: RayJob) -> None:
    assert classify(runtime_env) is expected


def test_job_config_from_ray_job_submit() -> None:
    runtime_env = {"worker_process_setup_hook": HOOK, "env_vars": {"A": "1"}}
    config = json.dumps({"runtime_env": runtime_env, "metadata": {}})
    assert runtime_env_from_job_config(config) == runtime_env
    assert runtime_env_from_job_config(json.dumps({"metadata": {}})) == {}
    assert runtime_env_from_job_config(json.dumps({"runtime_env": None})) == {}


def test_job_config_that_is_not_json_names_the_variable() -> None:
    with pytest.raises(ValueError, match="RAY_JOB_CONFIG_JSON_ENV_VAR is not JSON"):
        runtime_env_from_job_config("{runtime_env")


@pytest.mark.parametrize("case", [c for c in RayJob if c is not RayJob.HOOKED])
def test_warning_names_the_case_and_the_fix(case: RayJob) -> None:
    text = warning_text(case, "my_site.setup")
    assert text.startswith("[llama4-router-weight] --use-ray: ")
    assert case.value in text
    assert f"'worker_process_setup_hook': '{HOOK}'" in text
    assert "SGLANG_PLUGINS" in text and "SGLANG_NVFP4_PATCHES_" in text
    assert "installed on every node" in text
    assert ("'my_site.setup'" in text) is (case is RayJob.OTHER_HOOK)


def test_doctor_note_says_which_case_applies() -> None:
    assert note_text(RayJob.HOOKED).startswith("--use-ray: applied in Ray scheduler actors")
    for case in (RayJob.NO_HOOK, RayJob.OTHER_HOOK, RayJob.NOT_WHITELISTED):
        assert note_text(case).startswith("--use-ray: not applied in Ray scheduler actors")
        assert case.value in note_text(case)
    assert note_text(RayJob.NO_JOB).startswith("--use-ray: applied in Ray scheduler actors only")
    assert HOOK in note_text(RayJob.NO_JOB)
