"""FlashInfer's ``cutlass_fused_moe`` on CPU: our reference of its contract, recording what it
was given. NVFP4 expert weights are decoded exactly where every scale is one (activation
quantization taken as exact: ``docs/numerics.md``); other quantized weights give zeros (for
checks of the call only); an ``activation_type`` the reference lacks is refused. Both names
SGLang reaches it by are replaced: FlashInfer's, and the one ModelOpt bound at import.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from sglang_nvfp4_patches.post_import import module_exists
from sglang_nvfp4_patches.reference.cutlass_moe_contract import (
    GATE_ACTIVATIONS,
    cutlass_fused_moe_reference,
)
from sglang_nvfp4_patches.simulation.patching import attribute

RUNNER_MODULE = "sglang.srt.layers.moe.moe_runner.flashinfer_cutlass"
MODELOPT_MODULE = "sglang.srt.layers.quantization.modelopt_quant"
MODELOPT_KERNEL_NAME = "flashinfer_cutlass_fused_moe"  # bound at import before the runner
E4M3_ONE = 0x38  # 1.0 as a float8_e4m3fn byte
E2M1_GRID: tuple[float, ...] = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)  # FP4 magnitudes


def _e2m1_values(codes: torch.Tensor) -> torch.Tensor:
    magnitude = torch.tensor(E2M1_GRID)[(codes & 7).long()]
    return torch.where(codes >= 8, -magnitude, magnitude)


def decode_e2m1(packed: torch.Tensor) -> torch.Tensor:
    """Packed FP4 (two E2M1 codes per byte, low nibble first) to float32 values."""
    codes = packed.contiguous().view(torch.uint8)
    return _e2m1_values(torch.stack([codes & 0xF, codes >> 4], dim=-1).flatten(-2))


def random_fp4(shape: tuple[int, ...], generator: torch.Generator) -> tuple[torch.Tensor, ...]:
    """Values on the E2M1 grid and their packed bytes (low nibble first)."""
    codes = torch.randint(0, 16, shape, generator=generator, dtype=torch.uint8)
    return _e2m1_values(codes), codes[..., 0::2] | (codes[..., 1::2] << 4)


def random_batch(
    tokens: int, hidden: int, experts: int, top_k: int, dtype: torch.dtype, seed: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Hidden states, router weights in (0.1, 1) and distinct expert ids per token."""
    generator = torch.Generator().manual_seed(100 + seed)
    x = torch.randn(tokens, hidden, generator=generator).to(dtype)
    weights = torch.rand(tokens, top_k, generator=generator) * 0.9 + 0.1
    ids = torch.stack(
        [torch.randperm(experts, generator=generator)[:top_k] for _ in range(tokens)]
    ).to(torch.int32)
    return x, weights, ids


def _unit_scaled(quant_scales: list[torch.Tensor], fc1: torch.Tensor, fc2: torch.Tensor) -> bool:
    """Whether NVFP4 quant scales are all one (the swizzled layout pads with zero bytes)."""
    if not all(bool(torch.all(quant_scales[i] == 1)) for i in (0, 2, 3, 5)):
        return False
    for weights, block_scales in ((fc1, quant_scales[1]), (fc2, quant_scales[4])):
        scale_bytes = block_scales.contiguous().view(torch.uint8)
        blocks = weights.contiguous().view(torch.uint8).numel() * 2 // 16
        ones = int((scale_bytes == E4M3_ONE).sum())
        if ones != blocks or ones + int((scale_bytes == 0).sum()) != scale_bytes.numel():
            return False
    return True


def activation_name(activation_type: Any) -> str:
    """FlashInfer's ``ActivationType`` (enum or int; none: SwiGLU) as a reference name."""
    if activation_type is None:
        return "Swiglu"
    from flashinfer.fused_moe.core import ActivationType

    name = ActivationType(int(activation_type)).name
    if name not in GATE_ACTIVATIONS:
        raise NotImplementedError(
            f"the CPU stand-in of FlashInfer's cutlass_fused_moe has no reference for "
            f"ActivationType.{name}"
        )
    return name


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
        if kwargs.get("input_sf") is not None or (
            quant_scales is not None and not _unit_scaled(quant_scales, fc1, fc2)
        ):
            result = torch.zeros_like(output) if output is not None else None
        else:
            if quant_scales is not None:
                fc1, fc2 = decode_e2m1(fc1), decode_e2m1(fc2)
            result = cutlass_fused_moe_reference(
                kwargs["input"],
                kwargs["token_selected_experts"],
                kwargs["token_final_scales"],
                fc1,
                fc2,
                kwargs["output_dtype"],
                activation=activation_name(kwargs.get("activation_type")),
                ep_size=int(kwargs.get("ep_size") or 1),
                ep_rank=int(kwargs.get("ep_rank") or 0),
            )
        return [output.copy_(result) if output is not None else result]


@contextlib.contextmanager
def cpu_cutlass_kernel() -> Iterator[RecordingCutlassKernel]:
    """The stand-in in place of FlashInfer's kernel (and its availability check) in the block."""
    import flashinfer.fused_moe

    kernel = RecordingCutlassKernel()
    with contextlib.ExitStack() as stack:
        stack.enter_context(attribute(flashinfer.fused_moe, "cutlass_fused_moe", kernel))
        if module_exists(RUNNER_MODULE):
            runner = importlib.import_module(RUNNER_MODULE)
            stack.enter_context(attribute(runner, "is_flashinfer_available", lambda: True))
        modelopt = importlib.import_module(MODELOPT_MODULE)
        if hasattr(modelopt, MODELOPT_KERNEL_NAME):
            stack.enter_context(attribute(modelopt, MODELOPT_KERNEL_NAME, kernel))
        yield kernel


def cuda_moves_stay_on_cpu() -> contextlib.AbstractContextManager[None]:
    """``tensor.cuda()`` is the CPU tensor in the block (0.5.18's swizzle moves to the GPU)."""
    return attribute(torch.Tensor, "cuda", lambda tensor, *_args, **_kwargs: tensor)
