"""``--use-ray`` with real Ray on CPU: the job-level setup hook loads the plugin in every actor.

One local Ray; two jobs on it, each from its own driver process: one with the runtime env of
README's recipe, one with the same env without the hook. In each, an actor created the way
SGLang creates its scheduler actors (no ``runtime_env`` of its own) imports SGLang's NVFP4 MoE
modules, as building a MoE layer does, and reads back what SGLang holds; the driver runs the
check SGLang's Ray engine import triggers. Fresh processes that import SGLang's Ray engine
after ``load_plugins()``, as ``--use-ray``'s launcher does, show the check is wired to that
import (``ray job submit`` cases: the job config Ray hands the entrypoint).
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

import sglang_nvfp4_patches
from sglang_nvfp4_patches.llama4_router_weight import ray_job_check as ray_actors
from support import SCRIPTS
from support import ray_jobs as ray_jobs_support
from support.forkserver import run_python
from support.sglang_cpu import runner_module_present

pytestmark = pytest.mark.skipif(
    not (runner_module_present() and ray_actors.actors_skip_plugins()),
    reason="not applicable: llama4-router-weight does not apply to this SGLang (no "
    "FlashInfer CUTLASS MoE runner), or it has no Ray scheduler actors that skip plugins",
)

PROBE = SCRIPTS / "ray_engine_import_probe.py"
# README's recipe; SGLANG_PLUGINS names only our plugin, so the hook loads nothing else.
ENV_VARS = {"SGLANG_PLUGINS": "nvfp4_patches"}
HOOKED_ENV = {"worker_process_setup_hook": "sglang.srt.plugins.load_plugins", "env_vars": ENV_VARS}
UNHOOKED_ENV = {"env_vars": ENV_VARS}
# A site's own setup hook (not SGLang's load_plugins): the actors still miss the plugin.
OTHER_HOOK_ENV = {"worker_process_setup_hook": "my_site.setup", "env_vars": ENV_VARS}
JOBS = {"hooked": HOOKED_ENV, "unhooked": UNHOOKED_ENV}
MOE_METHODS = ("ModelOptNvFp4FusedMoEMethod", "CompressedTensorsW4A4Nvfp4MoE")


@pytest.fixture(scope="module")
def ray_jobs() -> dict[str, tuple[dict[str, Any], list[str]]]:
    """One local Ray; both jobs run on it at once, each from its own driver process (one job
    per driver, and the two workers' SGLang imports overlap), started in the background when
    the session began (``support/ray_jobs.py``)."""
    results = {}
    for name, outcome in ray_jobs_support.results(JOBS).items():
        assert "error" not in outcome, outcome.get("error")
        results[name] = (outcome["state"], outcome["warnings"])
    return results


def test_actor_gets_the_plugin_from_the_job_setup_hook(ray_jobs: dict) -> None:
    state, warnings = ray_jobs["hooked"]
    actor = state["actor"]
    assert actor["package"] == state["driver_package"] == sglang_nvfp4_patches.__file__
    # register() ran before the actor imported its MoE modules: pending, then applied
    assert actor["registered"]["llama4-router-weight"] == "pending"
    assert actor["create_moe_runner_hooked"] == dict.fromkeys(MOE_METHODS, True)
    assert actor["doctor"]["status"] == "applied"
    assert "--use-ray: applied in Ray scheduler actors (" in actor["doctor"]["reason"]
    assert state["driver_case"] == "HOOKED"
    assert state["driver_doctor_note"].startswith("--use-ray: applied in Ray scheduler actors (")
    assert warnings == []


def test_actors_run_at_the_suites_niceness(ray_jobs: dict) -> None:
    """Ray's default of 15 starved the actors' SGLang imports beside a busy suite (ten
    minutes, a CI run); ``ray_jobs_runner.py`` sets Ray's worker niceness to 0."""
    assert [ray_jobs[name][0]["actor"]["niceness"] for name in JOBS] == [os.nice(0)] * len(JOBS)


def test_actor_without_the_hook_lacks_the_plugin_and_the_driver_warns(ray_jobs: dict) -> None:
    state, warnings = ray_jobs["unhooked"]
    actor = state["actor"]
    assert actor["package"] == state["driver_package"] == sglang_nvfp4_patches.__file__
    assert actor["registered"] == {}
    assert actor["create_moe_runner_hooked"] == dict.fromkeys(MOE_METHODS, False)
    assert actor["doctor"]["status"] == "failed"
    assert "still rejects apply_router_weight_on_input" in actor["doctor"]["reason"]
    assert state["driver_case"] == "NO_HOOK"
    assert state["driver_doctor_note"].startswith("--use-ray: not applied in Ray scheduler")
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith("WARNING:sglang_nvfp4_patches.llama4_router_weight:")
    assert "the job's runtime env has no worker_process_setup_hook" in warnings[0]
    assert "'worker_process_setup_hook': 'sglang.srt.plugins.load_plugins'" in warnings[0]


def import_ray_engine(job_runtime_env: dict[str, Any] | None) -> tuple[dict, list[str]]:
    args = [str(PROBE)]
    if job_runtime_env is not None:
        args += ["--job-runtime-env", json.dumps(job_runtime_env)]
    done = run_python(args, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("STATE ")]
    warnings = [x for x in done.stderr.splitlines() if x.startswith("WARNING:sglang_nvfp4_patches")]
    return json.loads(line[len("STATE ") :]), warnings


@pytest.mark.release_matrix  # the real-Ray case above runs on the primary release only (~1 min)
@pytest.mark.parametrize(
    ("job_runtime_env", "expected"),
    [
        (None, ray_actors.RayJob.NO_JOB),
        (UNHOOKED_ENV, ray_actors.RayJob.NO_HOOK),
        (OTHER_HOOK_ENV, ray_actors.RayJob.OTHER_HOOK),
        (HOOKED_ENV, ray_actors.RayJob.HOOKED),
    ],
    ids=[
        "launch-server",
        "job-submit-without-hook",
        "job-submit-with-another-hook",
        "job-submit-with-hook",
    ],
)
def test_importing_sglang_ray_engine_checks_the_job(
    job_runtime_env: dict[str, Any] | None, expected: ray_actors.RayJob
) -> None:
    """``python -m sglang.launch_server --use-ray`` alone, and under ``ray job submit``."""
    state, warnings = import_ray_engine(job_runtime_env)
    assert not state["ray_imported_by_plugin"] and not state["ray_imported_by_doctor"]
    assert state["doctor_note_before"] == state["doctor_note"]
    assert state["ray_initialized"] is False  # the check started no Ray
    assert state["doctor_note"] == ray_actors.note_text(expected)
    if expected is ray_actors.RayJob.HOOKED:
        assert warnings == []
    else:
        assert len(warnings) == 1, warnings
        assert expected.value in warnings[0]
        assert "'worker_process_setup_hook': 'sglang.srt.plugins.load_plugins'" in warnings[0]
    if expected is ray_actors.RayJob.OTHER_HOOK:
        assert "(it is 'my_site.setup')" in warnings[0]
