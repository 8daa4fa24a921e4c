"""Run real SGLang MoE code on this CPU machine.

Only what needs a GPU is replaced: the FlashInfer ``cutlass_fused_moe`` call (by our CPU
reference of its contract, recording what it was given), FlashInfer's availability check,
the GPU facts (simulated through SGLang's own ``override_platform``; torch's compute
capability where SGLang asks torch) and, where a test asks for it, ``tensor.cuda()``. The single-GPU
tensor-parallel group is a one-rank stand-in: the runner only asks it for ``world_size``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

from sglang_nvfp4_patches.reference.cutlass_moe_contract import cutlass_fused_moe_reference
from sglang_nvfp4_patches.reference.nvfp4 import E2M1_GRID
from sglang_nvfp4_patches.simulation.gpus import GPU_PROFILES, device_capability
from sglang_nvfp4_patches.simulation.moe_layer import (
    llama4_runner_config as release_llama4_runner_config,
)
from sglang_nvfp4_patches.simulation.moe_layer import published_scheduler_config

RUNNER_MODULE = "sglang.srt.layers.moe.moe_runner.flashinfer_cutlass"
E4M3_ONE = 0x38  # 1.0 as a float8_e4m3fn byte


def decode_e2m1(packed: torch.Tensor) -> torch.Tensor:
    """Packed FP4 (two E2M1 codes per byte, low nibble first) to float32 values."""
    codes = packed.contiguous().view(torch.uint8)
    nibbles = torch.stack([codes & 0xF, codes >> 4], dim=-1).flatten(-2)
    magnitude = torch.tensor(E2M1_GRID)[(nibbles & 7).long()]
    return torch.where(nibbles >= 8, -magnitude, magnitude)


def _unit_scaled(quant_scales: list[torch.Tensor], fc1: torch.Tensor, fc2: torch.Tensor) -> bool:
    """NVFP4 quant scales that are all one: global scales, alphas, and one E4M3 1.0 per block
    of 16 weights (the swizzled layout pads with zero bytes)."""
    if not all(bool(torch.all(quant_scales[i] == 1)) for i in (0, 2, 3, 5)):
        return False
    for weights, block_scales in ((fc1, quant_scales[1]), (fc2, quant_scales[4])):
        scale_bytes = block_scales.contiguous().view(torch.uint8)
        blocks = weights.contiguous().view(torch.uint8).numel() * 2 // 16
        ones = int((scale_bytes == E4M3_ONE).sum())
        if ones != blocks or ones + int((scale_bytes == 0).sum()) != scale_bytes.numel():
            return False
    return True


@dataclass
class RecordingCutlassKernel:
    """Stands in for ``flashinfer.fused_moe.cutlass_fused_moe`` on CPU."""

    calls: list[dict[str, Any]] = field(default_factory=list)

    def __call__(self, **kwargs: Any) -> list[torch.Tensor]:
        self.calls.append(
            {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in kwargs.items()}
        )
        output = kwargs.get("output")
        quant_scales = kwargs.get("quant_scales")
        fc1, fc2 = kwargs["fc1_expert_weights"], kwargs["fc2_expert_weights"]
        if quant_scales is not None or kwargs.get("input_sf") is not None:
            if kwargs.get("input_sf") is not None or not _unit_scaled(quant_scales, fc1, fc2):
                # Only NVFP4 weights with unit scales are decoded; callers of this branch
                # only inspect what the kernel was given.
                result = torch.zeros_like(output) if output is not None else None
                return self._returned(result, output)
            # NVFP4 weights with unit scales decode exactly; the kernel's activation
            # quantization is taken as exact (its numerics: docs/numerics.md).
            fc1, fc2 = decode_e2m1(fc1), decode_e2m1(fc2)
        result = cutlass_fused_moe_reference(
            kwargs["input"],
            kwargs["token_selected_experts"],
            kwargs["token_final_scales"],
            fc1,
            fc2,
            kwargs["output_dtype"],
        )
        return self._returned(result, output)

    @staticmethod
    def _returned(result: torch.Tensor | None, output: torch.Tensor | None) -> list[Any]:
        if output is not None:
            output.copy_(result)
            result = output
        return [result]


def install_cpu_cutlass_kernel(monkeypatch: Any) -> RecordingCutlassKernel:
    import importlib

    import flashinfer.fused_moe

    kernel = RecordingCutlassKernel()
    monkeypatch.setattr(flashinfer.fused_moe, "cutlass_fused_moe", kernel)
    runner = importlib.import_module(RUNNER_MODULE)
    monkeypatch.setattr(runner, "is_flashinfer_available", lambda: True)
    return kernel


def keep_cuda_moves_on_cpu(monkeypatch: Any) -> None:
    """``tensor.cuda()`` returns the CPU tensor (0.5.18's NVFP4 block-scale swizzle moves its
    result to the GPU explicitly)."""
    monkeypatch.setattr(torch.Tensor, "cuda", lambda tensor, *_args, **_kwargs: tensor)


def single_rank_layer() -> torch.nn.Module:
    """The MoE placement a runner config reads from its layer: one rank, no EP."""
    layer = torch.nn.Module()
    layer.moe_tp_size, layer.moe_tp_rank, layer.moe_ep_size, layer.moe_ep_rank = 1, 0, 1, 0
    return layer


@contextlib.contextmanager
def _single_rank_tp_group(monkeypatch: Any) -> Iterator[None]:
    import importlib

    group = SimpleNamespace(world_size=1)
    runner = importlib.import_module(RUNNER_MODULE)
    if hasattr(runner, "get_tp_group"):  # releases that read the group from distributed
        monkeypatch.setattr(runner, "get_tp_group", lambda: group)
        yield
        return
    from sglang.srt.runtime_context import get_parallel

    with get_parallel().override(tp_group=group):
        yield


def llama4_runner_config(
    experts: int, hidden: int, intermediate: int, top_k: int = 1, on_input: bool = True, **kw: Any
) -> Any:
    """Llama 4's ``MoeRunnerConfig``, on a one-rank layer unless ``layer=`` is given."""
    kw.setdefault("layer", single_rank_layer())
    return release_llama4_runner_config(experts, hidden, intermediate, top_k, on_input, **kw)


def runner_module_present() -> bool:
    from sglang_nvfp4_patches.llama4_router_weight.state import module_exists

    return module_exists(RUNNER_MODULE)


def needs_runner_module() -> Any:
    """Skip marker for the runner tests on 0.5.14 and older, which call the CUTLASS kernel
    inline without a MoE runner; there the patch says 'not applicable' (checked by doctor)."""
    import pytest

    return pytest.mark.skipif(
        not runner_module_present(),
        reason="this SGLang has no FlashInfer CUTLASS MoE runner; the patch is not applicable",
    )


@contextlib.contextmanager
def scheduler_on(gpu: str, model_dir: Path, monkeypatch: Any, **flags: Any) -> Iterator[Any]:
    """A resolved ServerArgs published as this process's scheduler config, on a simulated GPU."""
    with (
        published_scheduler_config(GPU_PROFILES[gpu], model_dir, **flags) as server_args,
        _single_rank_tp_group(monkeypatch),
    ):
        yield server_args


# Resolution turns this on in os.environ for the FlashInfer all-to-all (and refuses it beside
# --flashinfer-a2a-dispatch-type), so it must not leak from one resolution into the next.
SET_BY_RESOLUTION = ("SGLANG_MOE_NVFP4_DISPATCH",)


def a2a_dispatch_switch() -> str:
    """The switch that turns off the FlashInfer all-to-all's NVFP4 dispatch on this release:
    a server flag from 0.5.20 (SGLang refuses the environment variable beside it)."""
    from sglang.srt.server_args import ServerArgs

    if hasattr(ServerArgs, "flashinfer_a2a_dispatch_type"):
        return "--flashinfer-a2a-dispatch-type bf16"
    return "SGLANG_MOE_NVFP4_DISPATCH=0"


def start_dp_attention(server_args: Any, monkeypatch: Any) -> None:
    """What the scheduler's distributed start-up records for DP attention (it needs process
    groups, so on CPU only its flag is set, from the published topology where SGLang can)."""
    import importlib

    dp_attention = importlib.import_module("sglang.srt.layers.dp_attention")
    if hasattr(dp_attention, "initialize_dp_attention_flags"):  # 0.5.22+
        dp_attention.initialize_dp_attention_flags(server_args)
    elif hasattr(dp_attention, "_ENABLE_DP_ATTENTION_FLAG"):  # 0.5.15.post1
        monkeypatch.setattr(
            dp_attention, "_ENABLE_DP_ATTENTION_FLAG", bool(server_args.enable_dp_attention)
        )
    else:  # 0.5.18-0.5.20: a runtime flag
        from sglang.srt.runtime_context import get_flags

        monkeypatch.setattr(get_flags().dp, "enabled", bool(server_args.enable_dp_attention))


@contextlib.contextmanager
def moe_layer_build_on(gpu: str, model_dir: Path, monkeypatch: Any, **flags: Any) -> Iterator[Any]:
    """Where a scheduler stands when it builds MoE layers: the resolved ServerArgs published,
    MoE settings and DP attention initialized, on a simulated GPU. Environment variables
    that SGLang's resolution sets in the process are undone afterwards."""
    for name in SET_BY_RESOLUTION:  # recorded as unset, so teardown removes SGLang's value
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    profile = GPU_PROFILES[gpu]
    with (
        device_capability(profile),
        published_scheduler_config(profile, model_dir, **flags) as server_args,
    ):
        start_dp_attention(server_args, monkeypatch)
        with _moe_group_sizes(server_args):
            yield server_args


def _moe_group_sizes(server_args: Any) -> Any:
    """0.5.15.post1 reads the EP and attention-DP widths off the process groups, which need
    GPUs; SGLang's own override seam stands in for them there."""
    from sglang.srt.runtime_context import get_parallel

    parallel = get_parallel()
    try:
        parallel.moe_ep_size  # noqa: B018  # later releases read the published config
        return contextlib.nullcontext()
    except Exception:
        dp_size = server_args.dp_size if server_args.enable_dp_attention else 1
        return parallel.override(moe_ep_size=server_args.ep_size, attn_dp_size=dp_size)
