"""A Ray driver in its own process: join a running Ray as a new job with the given runtime env,
create an actor the way SGLang creates its scheduler actors (no ``runtime_env`` of its own),
let it import SGLang's NVFP4 MoE modules as building a MoE layer does, and print what it found
next to what this driver's check says about the job.

``python ray_job_probe.py --address GCS --runtime-env JSON``. The actor class lives in
``__main__``, so Ray ships it by value: the workers need only SGLang and this plugin installed.
"""

from __future__ import annotations

import argparse
import json
import logging
from typing import Any

# What SGLang imports when it builds a ModelOpt or compressed-tensors NVFP4 MoE layer.
NVFP4_MOE_METHODS = {
    "sglang.srt.layers.quantization.modelopt_quant": "ModelOptNvFp4FusedMoEMethod",
    "sglang.srt.layers.quantization.compressed_tensors.schemes."
    "compressed_tensors_w4a4_nvfp4_moe": "CompressedTensorsW4A4Nvfp4MoE",
}


class PluginStateInActor:
    """Runs in a Ray worker: what a scheduler actor finds once SGLang loads its MoE modules."""

    def read(self) -> dict[str, Any]:
        import importlib
        import os

        import sglang_nvfp4_patches
        from sglang_nvfp4_patches import this_process
        from sglang_nvfp4_patches.llama4_router_weight.commands import current_state

        hooked = {}
        for module_name, cls_name in NVFP4_MOE_METHODS.items():
            method_cls = getattr(importlib.import_module(module_name), cls_name)
            hooked[cls_name] = hasattr(method_cls.__dict__["create_moe_runner"], "__wrapped__")
        report = current_state()  # doctor's reader; loads nothing
        return {
            "package": sglang_nvfp4_patches.__file__,
            "registered": {name: r.state.value for name, r in this_process.reports().items()},
            "create_moe_runner_hooked": hooked,
            "doctor": {"status": report.state.value, "reason": report.reason},
            "niceness": os.nice(0),
        }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--address", required=True)
    parser.add_argument("--runtime-env", required=True, help="the job's runtime env (JSON)")
    parser.add_argument("--actor-timeout", type=float, required=True, help="seconds")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    import ray

    import sglang_nvfp4_patches
    from sglang_nvfp4_patches.llama4_router_weight import ray_job_check as ray_actors

    ray.init(address=args.address, runtime_env=json.loads(args.runtime_env), log_to_driver=False)
    actor = ray.remote(PluginStateInActor).options(num_cpus=0).remote()
    state = {"actor": ray.get(actor.read.remote(), timeout=args.actor_timeout)}
    state["driver_package"] = sglang_nvfp4_patches.__file__
    state["driver_case"] = ray_actors.check_ray_job().name  # what SGLang's engine import runs
    state["driver_doctor_note"] = ray_actors.doctor_note()
    ray.shutdown()
    print("STATE " + json.dumps(state))


if __name__ == "__main__":
    main()
