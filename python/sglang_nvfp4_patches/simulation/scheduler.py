"""Where a scheduler stands when it builds MoE layers, on CPU: the resolved ServerArgs
published, SGLang's MoE settings and DP-attention flag initialized, the GPU simulated, and a
one-rank tensor-parallel group (the CUTLASS runner only asks it for ``world_size``)."""

from __future__ import annotations

import contextlib
import importlib
import inspect
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from sglang_nvfp4_patches.post_import import module_exists
from sglang_nvfp4_patches.simulation.cutlass_kernel import MODELOPT_MODULE, RUNNER_MODULE
from sglang_nvfp4_patches.simulation.gpus import GPU_PROFILES, device_capability, simulated_gpu
from sglang_nvfp4_patches.simulation.patching import attribute, environ_unset
from sglang_nvfp4_patches.simulation.server_args import resolved_server_args

# Resolution sets this in os.environ: it must not leak into the next resolution.
SET_BY_RESOLUTION = ("SGLANG_MOE_NVFP4_DISPATCH",)


@contextlib.contextmanager
def single_rank_tp_group() -> Iterator[None]:
    group = SimpleNamespace(world_size=1)
    # Before the CUTLASS MoE runner existed, the ModelOpt method ran the kernel itself.
    holder = RUNNER_MODULE if module_exists(RUNNER_MODULE) else MODELOPT_MODULE
    module = importlib.import_module(holder)
    if hasattr(module, "get_tp_group"):  # releases that read the group from distributed
        with attribute(module, "get_tp_group", lambda: group):
            yield
        return
    from sglang.srt.runtime_context import get_parallel

    with get_parallel().override(tp_group=group):
        yield


def initialize_moe_config(server_args: Any) -> None:
    """SGLang's MoE settings seeded from the published ServerArgs (older releases read it)."""
    from sglang.srt.layers.moe.utils import initialize_moe_config

    if inspect.signature(initialize_moe_config).parameters:
        initialize_moe_config(server_args)
    else:
        initialize_moe_config()


def _dp_attention_started(server_args: Any) -> contextlib.AbstractContextManager[None]:
    """What the scheduler's distributed start-up records for DP attention (it needs process
    groups, so on CPU only its flag is set, from the published topology where SGLang can)."""
    dp_attention = importlib.import_module("sglang.srt.layers.dp_attention")
    enabled = bool(server_args.enable_dp_attention)
    if hasattr(dp_attention, "initialize_dp_attention_flags"):  # the newest releases
        dp_attention.initialize_dp_attention_flags(server_args)
        return contextlib.nullcontext()
    if hasattr(dp_attention, "_ENABLE_DP_ATTENTION_FLAG"):  # 0.5.15.post1
        return attribute(dp_attention, "_ENABLE_DP_ATTENTION_FLAG", enabled)
    from sglang.srt.runtime_context import get_flags  # otherwise: a runtime flag

    return attribute(get_flags().dp, "enabled", enabled)


def _moe_group_sizes(server_args: Any) -> contextlib.AbstractContextManager[Any]:
    """0.5.15.post1 reads the EP and attention-DP widths off the process groups (GPUs); SGLang's
    override seam stands in for them there (older releases ask placement functions)."""
    try:
        from sglang.srt.runtime_context import get_parallel
    except ImportError:  # no such seam: the layer reads its placement functions
        return contextlib.nullcontext()
    parallel = get_parallel()
    try:
        parallel.moe_ep_size  # noqa: B018  # later releases read the published config
        return contextlib.nullcontext()
    except Exception:
        dp_size = server_args.dp_size if server_args.enable_dp_attention else 1
        return parallel.override(moe_ep_size=server_args.ep_size, attn_dp_size=dp_size)


@contextlib.contextmanager
def moe_layer_build_on(gpu: str, model_dir: Path, **flags: Any) -> Iterator[Any]:
    """Where a scheduler stands when it builds MoE layers, on a simulated GPU."""
    profile = GPU_PROFILES[gpu]
    with (
        environ_unset(SET_BY_RESOLUTION),
        device_capability(profile),
        simulated_gpu(profile),
    ):
        server_args = resolved_server_args(model_dir, **flags)
        try:
            from sglang.srt.runtime_context import publish
        except ImportError:  # no runtime_context.publish in this release
            from sglang.srt.server_args import set_global_server_args_for_scheduler

            set_global_server_args_for_scheduler(server_args)
        else:
            publish(server_args, role="scheduler")
        initialize_moe_config(server_args)
        with _dp_attention_started(server_args), _moe_group_sizes(server_args):
            yield server_args
