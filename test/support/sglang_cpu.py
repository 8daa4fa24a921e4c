"""Run real SGLang MoE code on this CPU machine: the test-side face of
:mod:`sglang_nvfp4_patches.simulation` (the kernel stand-in, the simulated scheduler), which
``verify`` shares; here with pytest's ``monkeypatch`` for what one test replaces.
"""

from __future__ import annotations

from typing import Any

import torch

from sglang_nvfp4_patches.simulation.cutlass_kernel import (
    E4M3_ONE,
    RUNNER_MODULE,
    RecordingCutlassKernel,
)
from sglang_nvfp4_patches.simulation.moe_layer import (
    llama4_runner_config as release_llama4_runner_config,
)

__all__ = ["E4M3_ONE", "RecordingCutlassKernel"]


def install_cpu_cutlass_kernel(monkeypatch: Any) -> RecordingCutlassKernel:
    """The kernel stand-in for one test (``simulation.cutlass_kernel.cpu_cutlass_kernel`` is
    the same as a context manager)."""
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


def a2a_dispatch_switch() -> str:
    """The switch that turns off the FlashInfer all-to-all's NVFP4 dispatch on this release:
    a server flag from 0.5.20 (SGLang refuses the environment variable beside it)."""
    from sglang.srt.server_args import ServerArgs

    if hasattr(ServerArgs, "flashinfer_a2a_dispatch_type"):
        return "--flashinfer-a2a-dispatch-type bf16"
    return "SGLANG_MOE_NVFP4_DISPATCH=0"
