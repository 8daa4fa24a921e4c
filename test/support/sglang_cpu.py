"""What only the tests need beside :mod:`sglang_nvfp4_patches.simulation` (the kernel
stand-in and the simulated scheduler, which ``verify`` shares): a bare one-rank layer, its
runner config, the skip marker for releases without the CUTLASS runner, the all-to-all
dispatch switch of this release, and a scheduler's site with a one-rank TP group.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from sglang_nvfp4_patches.simulation.cutlass_kernel import RUNNER_MODULE
from sglang_nvfp4_patches.simulation.llama4_layers import (
    llama4_runner_config as release_llama4_runner_config,
)
from sglang_nvfp4_patches.simulation.scheduler import moe_layer_build_on, single_rank_tp_group


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
    from sglang_nvfp4_patches.post_import import module_exists

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


@contextlib.contextmanager
def scheduler_on(gpu: str, model_dir: Path, **flags: Any) -> Iterator[Any]:
    """:func:`moe_layer_build_on` with a one-rank tensor-parallel group."""
    with moe_layer_build_on(gpu, model_dir, **flags) as server_args, single_rank_tp_group():
        yield server_args
