"""``--use-ray`` with real Ray on CPU: the job-level setup hook loads the plugin in every actor.

A local Ray is started once per case with the job runtime env of README's recipe (or the same
env without the hook). An actor created the way SGLang creates its scheduler actors (no
``runtime_env`` of its own) imports SGLang's NVFP4 MoE modules, as building a MoE layer does,
and reads back what SGLang holds. The driver-side check reads the same running Ray. Separate
fresh processes import SGLang's Ray engine after ``load_plugins()``, as ``--use-ray``'s
launcher does, to show the check is wired to that import and to nothing else.
"""

from __future__ import annotations

import copy
import json
import logging
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ray

import sglang_nvfp4_patches
from sglang_nvfp4_patches import ray_actors
from support.forkserver import run_python
from support.sglang_cpu import runner_module_present

pytestmark = pytest.mark.skipif(
    not (runner_module_present() and ray_actors.actors_skip_plugins()),
    reason="not applicable: llama4-router-weight does not apply to this SGLang (no "
    "FlashInfer CUTLASS MoE runner), or it has no Ray scheduler actors that skip plugins",
)

PROBE = Path(__file__).resolve().parents[1] / "support" / "ray_engine_import_probe.py"
# What SGLang imports when it builds a ModelOpt or compressed-tensors NVFP4 MoE layer.
NVFP4_MOE_METHODS = {
    "sglang.srt.layers.quantization.modelopt_quant": "ModelOptNvFp4FusedMoEMethod",
    "sglang.srt.layers.quantization.compressed_tensors.schemes."
    "compressed_tensors_w4a4_nvfp4_moe": "CompressedTensorsW4A4Nvfp4MoE",
}
# README's recipe; SGLANG_PLUGINS names only our plugin, so the hook loads nothing else.
ENV_VARS = {"SGLANG_PLUGINS": "nvfp4_patches"}
HOOKED_ENV = {"worker_process_setup_hook": "sglang.srt.plugins.load_plugins", "env_vars": ENV_VARS}
UNHOOKED_ENV = {"env_vars": ENV_VARS}


class PluginStateInActor:
    """Runs in a Ray worker: what a scheduler actor would find once SGLang loads its MoE."""

    def read(self) -> dict[str, Any]:
        import importlib

        import sglang_nvfp4_patches
        from sglang_nvfp4_patches import flashinfer_cutlass_runner, plugin

        lifted = {}
        for module_name, cls_name in NVFP4_MOE_METHODS.items():
            method_cls = getattr(importlib.import_module(module_name), cls_name)
            lifted[cls_name] = hasattr(method_cls.__dict__["create_moe_runner"], "__wrapped__")
        report = flashinfer_cutlass_runner.current_state()  # doctor's reader; loads nothing
        return {
            "package": sglang_nvfp4_patches.__file__,
            "registered": {name: r.state.value for name, r in plugin.reports().items()},
            "create_moe_runner_hooked": lifted,
            "doctor": {"status": report.state.value, "reason": report.reason},
        }


@pytest.fixture(scope="module", params=["hooked", "unhooked"])
def ray_job(request: pytest.FixtureRequest) -> Iterator[str]:
    """One local Ray per case; its workers inherit this process's environment (in CI the
    editable install, here also PYTHONPATH), as workers of a single-node job do."""
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(
        num_cpus=1,
        include_dashboard=False,
        log_to_driver=False,
        # a copy: Ray writes the hook into the env_vars of the dict it is given
        runtime_env=copy.deepcopy(HOOKED_ENV if request.param == "hooked" else UNHOOKED_ENV),
    )
    try:
        yield request.param
    finally:
        ray.shutdown()
        ray.cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


def test_actor_gets_the_plugin_only_from_the_job_setup_hook(
    ray_job: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    actor = ray.remote(PluginStateInActor).options(num_cpus=0).remote()
    state = ray.get(actor.read.remote(), timeout=600)
    ray.kill(actor)
    assert state["package"] == sglang_nvfp4_patches.__file__  # the code under test, not another
    monkeypatch.setattr(ray_actors, "_warned", threading.Event())
    with caplog.at_level(logging.WARNING, logger="sglang_nvfp4_patches"):
        case = ray_actors.check_ray_job()  # what the driver runs when SGLang imports its engine
    warnings = [r.getMessage() for r in caplog.records if "--use-ray" in r.getMessage()]
    if ray_job == "hooked":
        assert state["registered"]["llama4-router-weight"] == "applied"
        assert state["create_moe_runner_hooked"] == dict.fromkeys(NVFP4_MOE_METHODS.values(), True)
        assert state["doctor"]["status"] == "applied"
        assert "--use-ray: applied in Ray scheduler actors" in state["doctor"]["reason"]
        assert case is ray_actors.RayJob.HOOKED
        assert warnings == []
        assert ray_actors.doctor_note() == ray_actors.note_text(ray_actors.RayJob.HOOKED)
    else:
        assert state["registered"] == {}
        assert state["create_moe_runner_hooked"] == dict.fromkeys(NVFP4_MOE_METHODS.values(), False)
        assert state["doctor"]["status"] == "failed"
        assert "still rejects apply_router_weight_on_input" in state["doctor"]["reason"]
        assert case is ray_actors.RayJob.NO_HOOK
        assert len(warnings) == 1
        assert "has no worker_process_setup_hook" in warnings[0]
        assert "sglang.srt.plugins.load_plugins" in warnings[0]
        assert "--use-ray: not applied in Ray scheduler actors" in ray_actors.doctor_note()


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
        (HOOKED_ENV, ray_actors.RayJob.HOOKED),
    ],
    ids=["launch-server", "job-submit-without-hook", "job-submit-with-hook"],
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
