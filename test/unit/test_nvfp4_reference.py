"""Hand-worked checks of the CPU NVFP4 activation-quantization reference."""

from __future__ import annotations

import itertools

import pytest
import torch

from sglang_nvfp4_patches.simulation.cutlass_kernel import E2M1_GRID
from support.nvfp4 import (
    NVFP4BlockSizeError,
    NVFP4GlobalScaleError,
    dequantize_nvfp4,
    global_scale_for,
    nvfp4_activation_quantizer,
    quantize_dequantize_nvfp4,
    quantize_nvfp4,
    round_to_e2m1,
)

SUB = 2.0**-9  # smallest positive E4M3 subnormal


def _nearest_even_grid(value: float) -> float:
    """Brute force: nearest signed E2M1 value, ties to the even code index, saturating at 6."""
    magnitude = min(abs(value), 6.0)
    best = min(
        range(len(E2M1_GRID)),
        key=lambda code: (abs(E2M1_GRID[code] - magnitude), code % 2),
    )
    return E2M1_GRID[best] if value >= 0 else -E2M1_GRID[best]


def test_round_to_e2m1_ties_go_to_even_mantissa() -> None:
    ties = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0])
    assert round_to_e2m1(ties).tolist() == [0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0]
    assert round_to_e2m1(-ties).tolist() == [-0.0, -1.0, -1.0, -2.0, -2.0, -4.0, -4.0]


def test_round_to_e2m1_saturates_and_keeps_grid_points() -> None:
    grid = torch.tensor(E2M1_GRID)
    assert torch.equal(round_to_e2m1(grid), grid)
    assert torch.equal(round_to_e2m1(-grid), -grid)
    big = torch.tensor([6.0, 6.9, 7.0, 1e6, float("inf"), -7.0, -float("inf")])
    assert round_to_e2m1(big).tolist() == [6.0, 6.0, 6.0, 6.0, 6.0, -6.0, -6.0]


def test_round_to_e2m1_matches_brute_force_on_dense_points() -> None:
    # Every multiple of 1/16 in [-8, 8] hits all grid points, all midpoints and values between.
    values = torch.arange(-128, 129, dtype=torch.float32) / 16
    expected = [_nearest_even_grid(v) for v in values.tolist()]
    assert round_to_e2m1(values).tolist() == expected


def test_all_zero_tensor_quantizes_to_zero() -> None:
    x = torch.zeros(3, 32)
    quantized = quantize_nvfp4(x)
    assert float(quantized.global_scale) == 1.0
    assert torch.equal(quantized.block_scales.float(), torch.zeros(3, 2))
    assert torch.equal(quantized.codes, torch.zeros(3, 32))
    assert torch.equal(dequantize_nvfp4(quantized), torch.zeros(3, 32))


def test_block_reaching_6_times_448_gives_global_scale_one_and_scale_448() -> None:
    # Block 0: scale 448 (7 * 64), codes are x / 448 rounded; none of these is a tie.
    block0 = [2688, -1344, 672, 224, 448, 896, 1792, -2688, 300, 2000, 2600, -700, 0, 0, 0, 0]
    codes0 = [6, -3, 1.5, 0.5, 1, 2, 4, -6, 0.5, 4, 6, -1.5, 0, 0, 0, 0]
    # Block 1: all zero inside a non-zero tensor.
    x = torch.tensor([block0 + [0.0] * 16], dtype=torch.float32)
    quantized = quantize_nvfp4(x)
    assert float(quantized.global_scale) == 1.0
    assert quantized.block_scales.dtype == torch.float8_e4m3fn
    assert quantized.block_scales.float().tolist() == [[448.0, 0.0]]
    assert quantized.codes.tolist() == [codes0 + [0.0] * 16]
    assert dequantize_nvfp4(quantized).tolist() == [[c * 448.0 for c in codes0] + [0.0] * 16]


def test_power_of_two_block_scale_rounds_ties_to_even() -> None:
    # Global scale 1 (amax 2688 in block 0); block 1 has amax 6 * 256, so its scale is 256 and
    # x / 256 is exact: the E2M1 ties are real ties.
    ties = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.0]
    tie_codes = [0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0, 6.0]
    block1 = [256 * t for t in ties] + [-256 * t for t in ties]
    codes1 = tie_codes + [-c for c in tie_codes]
    x = torch.tensor([[2688.0] + [0.0] * 15 + block1])
    quantized = quantize_nvfp4(x)
    assert quantized.block_scales.float().tolist() == [[448.0, 256.0]]
    assert quantized.codes[0, 16:].tolist() == codes1
    assert dequantize_nvfp4(quantized)[0, 16:].tolist() == [256 * c for c in codes1]


def test_subnormal_e4m3_block_scales() -> None:
    # Global scale 1. Block scales are amax / 6 rounded to E4M3; below 2**-6 they are
    # subnormal multiples of 2**-9.
    exact = [6, -4, 3, 2, 1.5, 1, 0.5, 0, -6, 4, -3, -2, -1.5, -1, -0.5, 0]
    block1 = [3 * SUB * c for c in exact]  # amax / 6 = 3 * 2**-9: exact subnormal scale
    block2 = [6 * 2.7 * SUB, 2.7 * SUB] + [0.0] * 14  # 2.7 * 2**-9 rounds up to 3 * 2**-9
    block3 = [6 * 2.2 * SUB, -2.2 * SUB] + [0.0] * 14  # rounds down to 2 * 2**-9
    block4 = [6 * 0.4 * SUB, -0.1 * SUB] + [0.0] * 14  # below half of 2**-9: scale 0
    x = torch.tensor([[2688.0] + [0.0] * 15 + block1 + block2 + block3 + block4])
    quantized = quantize_nvfp4(x)
    assert float(quantized.global_scale) == 1.0
    assert quantized.block_scales.float().tolist() == [[448.0, 3 * SUB, 3 * SUB, 2 * SUB, 0.0]]
    codes = quantized.codes[0]
    assert codes[16:32].tolist() == [float(c) for c in exact]
    # 6 * 2.7 / 3 = 5.4 -> 6; 2.7 / 3 = 0.9 -> 1.
    assert codes[32:34].tolist() == [6.0, 1.0]
    # 6 * 2.2 / 2 = 6.6 saturates to 6; -2.2 / 2 = -1.1 -> -1.
    assert codes[48:50].tolist() == [6.0, -1.0]
    assert torch.equal(codes[64:], torch.zeros(16))
    dequant = dequantize_nvfp4(quantized)[0]
    assert dequant[16:32].tolist() == [3 * SUB * c for c in exact]
    assert dequant[32:34].tolist() == [18 * SUB, 3 * SUB]
    assert dequant[48:50].tolist() == [12 * SUB, -2 * SUB]
    assert torch.equal(dequant[64:], torch.zeros(16))


def test_dynamic_global_scale_is_2688_over_amax() -> None:
    x = torch.tensor([[12.0, -3.0] + [0.0] * 14])
    assert float(global_scale_for(x)) == 224.0
    quantized = quantize_nvfp4(x)
    assert float(quantized.global_scale) == 224.0
    # scale = e4m3(224 * 12 / 6) = 448; codes = x * 224 / 448 = x / 2.
    assert quantized.block_scales.float().tolist() == [[448.0]]
    assert quantized.codes[0, :2].tolist() == [6.0, -1.5]
    assert dequantize_nvfp4(quantized)[0, :2].tolist() == [12.0, -3.0]


def test_static_global_scale_saturates_block_scale_and_codes() -> None:
    # A calibrated global scale of 1 and a block amax of 6000 > 2688: the block scale is
    # clamped to 448 and the largest value saturates at code 6 (dequantized 2688).
    x = torch.tensor([[6000.0, 448.0] + [0.0] * 14])
    quantized = quantize_nvfp4(x, global_scale=1.0)
    assert quantized.block_scales.float().tolist() == [[448.0]]
    assert quantized.codes[0, :2].tolist() == [6.0, 1.0]
    assert quantize_dequantize_nvfp4(x, 1.0)[0, :2].tolist() == [2688.0, 448.0]


def test_negation_symmetry_and_leading_dims() -> None:
    generator = torch.Generator().manual_seed(3)
    x = torch.randn(2, 3, 64, generator=generator)
    flat = quantize_dequantize_nvfp4(x.reshape(6, 64))
    assert torch.equal(quantize_dequantize_nvfp4(x), flat.reshape(2, 3, 64))
    assert torch.equal(quantize_dequantize_nvfp4(-x), -flat.reshape(2, 3, 64))


def test_error_bounded_by_one_block_scale_step() -> None:
    # For a normal E4M3 block scale s, |x' - x| <= s / g: the widest E2M1 spacing is 2, so
    # rounding moves a code by at most 1, and saturation after the scale's downward rounding
    # (at most 1/16 relative) moves it by at most 6/16. Subnormal scales round coarser.
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(8, 256, generator=generator) * torch.logspace(-1, 1, 256)
    quantized = quantize_nvfp4(x)
    scales = quantized.block_scales.float()
    assert bool((scales >= 2.0**-6).all())  # all normal for this data
    step = (scales / quantized.global_scale).repeat_interleave(16, -1)
    error = (dequantize_nvfp4(quantized) - x).abs()
    assert bool((error <= step).all())
    assert bool((error > 0).any())  # the data is not already on the grid


def test_codes_are_on_the_grid_and_dtypes() -> None:
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(4, 48, generator=generator, dtype=torch.bfloat16)
    quantized = quantize_nvfp4(x)
    grid = set(E2M1_GRID) | {-v for v in E2M1_GRID}
    assert set(quantized.codes.flatten().tolist()) <= grid
    assert quantized.codes.dtype == torch.float32
    assert quantized.block_scales.shape == (4, 3)
    assert quantized.global_scale.dtype == torch.float32


def test_zero_tokens() -> None:
    out = quantize_dequantize_nvfp4(torch.zeros(0, 32))
    assert out.shape == (0, 32)


@pytest.mark.parametrize("shape", [(4, 20), (2, 8), (17,), ()])
def test_hidden_not_multiple_of_16_is_rejected(shape: tuple[int, ...]) -> None:
    with pytest.raises(NVFP4BlockSizeError, match="multiple of 16"):
        quantize_nvfp4(torch.ones(shape))


@pytest.mark.parametrize("bad", [0.0, -1.0, float("inf"), float("nan"), torch.tensor([1.0, 2.0])])
def test_bad_global_scale_is_rejected(bad: float | torch.Tensor) -> None:
    with pytest.raises(NVFP4GlobalScaleError):
        quantize_nvfp4(torch.ones(1, 16), global_scale=bad)
    with pytest.raises(NVFP4GlobalScaleError):
        nvfp4_activation_quantizer(bad)


def test_activation_quantizer_static_and_dynamic() -> None:
    x = torch.tensor([[12.0, 0.3] + [0.0] * 14, [1.0] * 16])
    dynamic = nvfp4_activation_quantizer()
    static = nvfp4_activation_quantizer(1.0)
    assert torch.equal(dynamic(x), quantize_dequantize_nvfp4(x, global_scale_for(x)))
    assert torch.equal(static(x), quantize_dequantize_nvfp4(x, 1.0))
    # With global scale 1 the first block's scale is e4m3(2) = 2, so 0.3 / 2 = 0.15 -> 0.
    assert static(x)[0, :2].tolist() == [12.0, 0.0]


@pytest.mark.parametrize("sign", list(itertools.product([1.0, -1.0], repeat=2)))
def test_single_nonzero_value_round_trips(sign: tuple[float, float]) -> None:
    # A block holding only its amax maps to code ±6 and back exactly when 448 * 6 / amax is exact.
    x = torch.zeros(1, 32)
    x[0, 0] = sign[0] * 2688.0
    x[0, 31] = sign[1] * 1536.0
    assert torch.equal(quantize_dequantize_nvfp4(x), x)
