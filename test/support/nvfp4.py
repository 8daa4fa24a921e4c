"""CPU reference of NVFP4 activation quantization as FlashInfer's CUTLASS MoE applies it (our
own, from the format and FlashInfer 0.7.2's ``cvt_warp_fp16_to_fp4``, non-4over6 E4M3 branch),
so tests can check that the router weight is folded in *before* quantization. Per row along the
last (hidden) dimension, in float32:

* global scale ``g``: given (the kernel's), or ``448 * 6 / amax(|x|)`` over the tensor as
  FlashInfer's ``fp4_quantize`` takes it (``1.0`` for an all-zero tensor);
* one E4M3 block scale per 16 values: ``s = e4m3(g * amax(|block|) / 6)``, nearest even,
  saturated to 448 (``__NV_SATFINITE``); subnormals occur naturally;
* codes ``q = e2m1(x * g / s)``, nearest even on ``0, 0.5, 1, 1.5, 2, 3, 4, 6`` (and
  negatives), saturated to ±6; a block whose scale is 0 gets all-zero codes, as the kernel's;
* dequantization ``x' = q * s / g``.

The kernel's reciprocals are approximate (``rcp.approx.ftz``), ours exact: the two differ only
within float32 rounding of an E4M3 or E2M1 rounding boundary.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

NVFP4_BLOCK_SIZE = 16
E2M1_MAX = 6.0
E4M3_MAX = 448.0


class NVFP4BlockSizeError(ValueError):
    """The hidden (last) dimension is not a multiple of the 16-value NVFP4 block."""


class NVFP4GlobalScaleError(ValueError):
    """A given global scale is not a single finite positive number."""


@dataclass(frozen=True)
class NVFP4Quantized:
    """Unpacked NVFP4 tensor: E2M1 codes as float32 values, E4M3 block scales, global scale."""

    codes: torch.Tensor  # float32, same shape as the input, values on ±E2M1_GRID
    block_scales: torch.Tensor  # float8_e4m3fn, shape [..., hidden // 16]
    global_scale: torch.Tensor  # float32 scalar


def round_to_e2m1(x: torch.Tensor) -> torch.Tensor:
    """Round float32 values to the E2M1 grid, ties to even mantissa, saturating at ±6 (steps
    0.5 below 2, 1 in [2, 4), 2 in [4, 6]: ``|x| / step`` half-to-even picks the even code)."""
    magnitude = x.float().abs().clamp(max=E2M1_MAX)
    step = torch.where(magnitude < 2.0, 0.5, torch.where(magnitude < 4.0, 1.0, 2.0))
    return torch.copysign(torch.round(magnitude / step) * step, x.float())


def global_scale_for(x: torch.Tensor) -> torch.Tensor:
    """Dynamic per-tensor global scale ``448 * 6 / amax(|x|)`` (float32 scalar; 1 if all zero)."""
    amax = x.float().abs().amax() if x.numel() else torch.tensor(0.0)
    if amax == 0:
        return torch.tensor(1.0, dtype=torch.float32)
    return (E4M3_MAX * E2M1_MAX) / amax


def _checked_global_scale(global_scale: float | torch.Tensor) -> torch.Tensor:
    scale = torch.as_tensor(global_scale, dtype=torch.float32).cpu()
    if scale.numel() != 1 or not bool(torch.isfinite(scale).all()) or float(scale) <= 0:
        raise NVFP4GlobalScaleError(
            "the NVFP4 global scale must be one finite positive float32 value "
            f"(448 * 6 / calibrated amax), got {global_scale!r}"
        )
    return scale.reshape(())


def quantize_nvfp4(
    x: torch.Tensor, global_scale: float | torch.Tensor | None = None
) -> NVFP4Quantized:
    """Quantize ``x`` (``[..., hidden]``, hidden a multiple of 16) to unpacked NVFP4."""
    if x.dim() == 0 or x.shape[-1] % NVFP4_BLOCK_SIZE != 0:
        raise NVFP4BlockSizeError(
            f"NVFP4 quantizes blocks of {NVFP4_BLOCK_SIZE} values along the hidden (last) "
            f"dimension, which must be a multiple of {NVFP4_BLOCK_SIZE}; got shape "
            f"{tuple(x.shape)}"
        )
    values = x.float().cpu()
    hidden = values.shape[-1]
    scale = global_scale_for(values) if global_scale is None else global_scale
    g = _checked_global_scale(scale)
    blocks = values.reshape(*values.shape[:-1], hidden // NVFP4_BLOCK_SIZE, NVFP4_BLOCK_SIZE)
    block_amax = blocks.abs().amax(dim=-1)
    block_scales = (g * (block_amax * (1.0 / E2M1_MAX))).clamp(max=E4M3_MAX)
    block_scales = block_scales.to(torch.float8_e4m3fn)
    s = block_scales.float()
    encode = torch.where(s > 0, 1.0 / (s * (1.0 / g)), torch.zeros_like(s))
    codes = round_to_e2m1(blocks * encode.unsqueeze(-1)).reshape(values.shape)
    return NVFP4Quantized(codes=codes, block_scales=block_scales, global_scale=g)


def dequantize_nvfp4(quantized: NVFP4Quantized) -> torch.Tensor:
    """float32 ``codes * block_scale / global_scale``, same shape as the quantized input."""
    codes = quantized.codes
    hidden = codes.shape[-1]
    blocks = codes.reshape(*codes.shape[:-1], hidden // NVFP4_BLOCK_SIZE, NVFP4_BLOCK_SIZE)
    s = quantized.block_scales.float().unsqueeze(-1)
    return (blocks * s / quantized.global_scale).reshape(codes.shape)


def quantize_dequantize_nvfp4(
    x: torch.Tensor, global_scale: float | torch.Tensor | None = None
) -> torch.Tensor:
    """What the kernel's GEMM effectively sees of ``x`` after NVFP4 quantization (float32)."""
    return dequantize_nvfp4(quantize_nvfp4(x, global_scale))


def nvfp4_activation_quantizer(
    global_scale: float | torch.Tensor | None = None,
) -> Callable[[torch.Tensor], torch.Tensor]:
    """An ``activation_quantizer`` for the reference (``None``: the global scale per input)."""
    if global_scale is not None:
        _checked_global_scale(global_scale)

    def quantizer(x: torch.Tensor) -> torch.Tensor:
        return quantize_dequantize_nvfp4(x, global_scale)

    return quantizer
