"""The MoE kernels the CPU simulation reaches but does not compute (FlashInfer's trtllm-gen
FP4 MoE, SGLang's own ``cutlass_moe_fp4``): each stand-in raises :class:`KernelReached`, telling
"SGLang failed before any kernel" from "the layer reached a kernel". Whether the GPU has
trtllm-gen kernels is read off FlashInfer's cubin architectures (left open where it does not say).
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Iterator
from typing import Any

from sglang_nvfp4_patches.post_import import module_exists
from sglang_nvfp4_patches.simulation.gpus import GpuProfile
from sglang_nvfp4_patches.simulation.patching import attribute

TRTLLM_FP4_MOE = ("trtllm_fp4_block_scale_moe", "trtllm_fp4_block_scale_routed_moe")
TRTLLM_RUNNER_MODULE = "sglang.srt.layers.moe.moe_runner.flashinfer_trtllm"
SGLANG_CUTLASS_MOE_MODULE = "sglang.srt.layers.moe.cutlass_moe"
SGLANG_CUTLASS_FP4 = "cutlass_moe_fp4"
CUBIN_ARCHS_MODULE = "flashinfer.jit.trtllm_gen_metainfo"
CUBIN_ARCHS = "BLACKWELL_CUBIN_ARCHS"


class KernelReached(Exception):
    """A layer's forward called a kernel the simulation does not compute."""

    def __init__(self, kernel: str, has_kernels: bool | None) -> None:
        self.kernel = kernel
        self.has_kernels = has_kernels  # for the simulated GPU; None: cannot tell
        super().__init__(kernel)


def has_cubins_for(capability: tuple[int, int], cubin_archs: tuple[str, ...]) -> bool:
    """Whether cubins built for ``cubin_archs`` (``Sm100a``: 10.0 only, ``Sm100f``: the 10.x
    family, ``Sm103a``: 10.3 only) run on a GPU of ``capability``."""
    major, minor = capability
    for arch in cubin_archs:
        digits, suffix = arch.removeprefix("Sm")[:-1], arch[-1]
        arch_major, arch_minor = int(digits[:-1]), int(digits[-1])
        if arch_major != major:
            continue
        if suffix == "f" or arch_minor == minor:
            return True
    return False


def trtllm_gen_moe_kernels(profile: GpuProfile) -> bool | None:
    """Whether FlashInfer has trtllm-gen MoE kernels for ``profile``'s GPU (``None``: unsaid)."""
    try:
        archs = getattr(importlib.import_module(CUBIN_ARCHS_MODULE), CUBIN_ARCHS)
    except (ImportError, AttributeError):
        return None
    return has_cubins_for(profile.capability, tuple(archs))


TRTLLM_KERNEL = "FlashInfer's trtllm-gen FP4 MoE"
TRTLLM_RUNNER = "flashinfer_trtllm"  # the MoE runner whose forward calls it


def _reached(kernel: str, has_kernels: bool | None) -> Callable[..., Any]:
    def stand_in(*_args: Any, **_kwargs: Any) -> Any:
        raise KernelReached(kernel, has_kernels)

    return stand_in


@contextlib.contextmanager
def uncomputed_kernels(profile: GpuProfile) -> Iterator[None]:
    """Inside the block, reaching one of these kernels raises :class:`KernelReached`."""
    import flashinfer
    import flashinfer.fused_moe

    trtllm = _reached(TRTLLM_KERNEL, trtllm_gen_moe_kernels(profile))
    owners: list[Any] = [flashinfer, flashinfer.fused_moe]
    if module_exists(TRTLLM_RUNNER_MODULE):
        owners.append(importlib.import_module(TRTLLM_RUNNER_MODULE))
    with contextlib.ExitStack() as stack:
        for owner in owners:
            for name in TRTLLM_FP4_MOE:
                if hasattr(owner, name):
                    stack.enter_context(attribute(owner, name, trtllm))
        if module_exists(SGLANG_CUTLASS_MOE_MODULE):
            cutlass_moe = importlib.import_module(SGLANG_CUTLASS_MOE_MODULE)
            if hasattr(cutlass_moe, SGLANG_CUTLASS_FP4):
                sglang_kernel = _reached("SGLang's own CUTLASS FP4 MoE (sgl-kernel)", None)
                stack.enter_context(attribute(cutlass_moe, SGLANG_CUTLASS_FP4, sglang_kernel))
        yield
