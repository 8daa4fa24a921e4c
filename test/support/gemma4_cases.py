"""SGLang's own resolution of one Gemma 4 configuration in this process (GPU simulated)."""

from __future__ import annotations

from pathlib import Path

from sglang_nvfp4_patches.gemma4_attention.rule_state import suspended
from sglang_nvfp4_patches.simulation.gpus import GPU_PROFILES, simulated_gpu
from sglang_nvfp4_patches.simulation.server_args import resolved_server_args

PLAIN = (str, int, float, bool, type(None), list, tuple, dict)


def resolved(model_dir: Path, gpu: str, patched: bool = True, **flags: str) -> dict:
    """Every resolved field; ``patched=False`` gives SGLang's answer with the rule suspended."""

    def run() -> dict:
        with simulated_gpu(GPU_PROFILES[gpu]):
            server_args = resolved_server_args(model_dir, random_seed=0, **flags)
            if hasattr(
                server_args, "resolved_dict"
            ):  # where SGLang resolves into a copy; older releases resolve in place
                return server_args.resolved_dict()
            return {
                name: value
                for name, value in vars(server_args).items()
                if not name.startswith("_") and isinstance(value, PLAIN)
            }

    if patched:
        return run()
    with suspended():
        return run()
