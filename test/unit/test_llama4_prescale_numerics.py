"""Numerics of the ``llama4-router-weight`` pre-scale through the CUTLASS MoE contract.

Llama 4 Scout-like shapes (hidden 5120, top-1 routing, sigmoid router weights), with few
experts and a small intermediate size to keep CPU time low. Llama 4's semantics are
``expert(x * w)``; the kernel computes ``scale * expert(quantize(input))``. The expected
values here are computed directly with torch ops, not through the code under test.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import pytest
import torch
import torch.nn.functional as F

from sglang_nvfp4_patches.llama4_router_weight.prescale import prescale_router_weight_on_input
from sglang_nvfp4_patches.reference.cutlass_moe_contract import (
    ActivationQuantizer,
    cutlass_fused_moe_reference,
)
from support.nvfp4 import global_scale_for, nvfp4_activation_quantizer

HIDDEN = 5120
EXPERTS = 4
INTER = 256
TOKENS = 64
SEEDS = (0, 1, 2)
BF16_UNIT_ROUNDOFF = 2.0**-9


@dataclass(frozen=True)
class Case:
    x: torch.Tensor  # float32 [T, H]
    weights: torch.Tensor  # float32 [T, 1], sigmoid router weights in (0, 1)
    ids: torch.Tensor  # int32 [T, 1]
    fc1: torch.Tensor  # float32 [E, 2I, H] as [up; gate]
    fc2: torch.Tensor  # float32 [E, H, I]


@functools.cache
def make_case(seed: int) -> Case:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(TOKENS, HIDDEN, generator=generator)
    fc1 = torch.randn(EXPERTS, 2 * INTER, HIDDEN, generator=generator) / HIDDEN**0.5
    fc2 = torch.randn(EXPERTS, HIDDEN, INTER, generator=generator) / INTER**0.5
    weights = torch.sigmoid(torch.randn(TOKENS, 1, generator=generator))
    ids = torch.randint(0, EXPERTS, (TOKENS, 1), generator=generator, dtype=torch.int32)
    return Case(x=x, weights=weights, ids=ids, fc1=fc1, fc2=fc2)


def llama4_experts(expert_input: torch.Tensor, case: Case) -> torch.Tensor:
    """Llama 4 top-1 MoE on an already router-weighted float32 input, plain torch ops.

    Rows are grouped per expert (ascending expert id) so each GEMM sees the same rows as the
    contract reference: CPU GEMM results may depend on the number of rows, and grouping the
    same way lets float32 results be compared bit for bit.
    """
    out = torch.zeros(expert_input.shape[0], HIDDEN)
    ids = case.ids[:, 0]
    for expert in range(EXPERTS):
        rows = (ids == expert).nonzero(as_tuple=True)[0]
        if rows.numel() == 0:
            continue
        projected = expert_input[rows] @ case.fc1[expert].t()
        up, gate = projected[:, :INTER], projected[:, INTER:]
        out[rows] = (F.silu(gate) * up) @ case.fc2[expert].t()
    return out


def rel_err(actual: torch.Tensor, expected: torch.Tensor) -> float:
    """Frobenius relative error in float64."""
    diff = actual.double() - expected.double()
    return float(diff.norm() / expected.double().norm())


def through_kernel_contract(
    hidden: torch.Tensor,
    case: Case,
    output_dtype: torch.dtype,
    quantizer: ActivationQuantizer | None = None,
) -> torch.Tensor:
    """The patched call: pre-scale, then the kernel with unit final scales."""
    ids_before = case.ids.clone()
    scaled, unit_scales = prescale_router_weight_on_input(hidden, case.weights)
    out = cutlass_fused_moe_reference(
        scaled, case.ids, unit_scales, case.fc1, case.fc2, output_dtype, quantizer
    )
    assert torch.equal(case.ids, ids_before)
    return out


@pytest.mark.parametrize("seed", SEEDS)
def test_float32_prescale_equals_llama4_semantics_exactly(seed: int) -> None:
    case = make_case(seed)
    out = through_kernel_contract(case.x, case, torch.float32)
    expected = llama4_experts(case.x * case.weights, case)
    assert out.dtype == torch.float32
    assert torch.equal(out, expected)


@pytest.mark.parametrize("seed", SEEDS)
def test_bf16_prescale_matches_llama4_semantics(seed: int) -> None:
    case = make_case(seed)
    x = case.x.to(torch.bfloat16)
    out = through_kernel_contract(x, case, torch.bfloat16)
    # Bit for bit what a bf16 Llama 4 layer computes: x * w in bf16, experts, bf16 output.
    in_model_dtype = (x * case.weights.to(torch.bfloat16)).float()
    assert torch.equal(out, llama4_experts(in_model_dtype, case).to(torch.bfloat16))
    # Against float32 math on the same bf16 activations, only bf16 roundings remain: w, x * w
    # and the output, amplified about 2x by the gated product (measured: about 2.3 u).
    exact = llama4_experts(x.float() * case.weights, case)
    assert rel_err(out, exact) <= 5 * BF16_UNIT_ROUNDOFF


def _calibrated_global_scale(seed: int) -> torch.Tensor:
    """Static activation global scale calibrated on another batch of Llama 4 expert inputs."""
    generator = torch.Generator().manual_seed(seed + 1000)
    x = torch.randn(TOKENS, HIDDEN, generator=generator)
    w = torch.sigmoid(torch.randn(TOKENS, 1, generator=generator))
    return global_scale_for(x * w)


@functools.cache
def plain_nvfp4_noise(seed: int) -> float:
    """Error NVFP4 alone causes on an unweighted expert input (no router weight involved)."""
    case = make_case(seed)
    x = case.x.to(torch.bfloat16).float()
    quantize = nvfp4_activation_quantizer()
    return rel_err(llama4_experts(quantize(x), case), llama4_experts(x, case))


@pytest.mark.parametrize("global_scale_mode", ["dynamic", "calibrated"])
@pytest.mark.parametrize("seed", SEEDS)
def test_nvfp4_prescale_before_quantization_beats_output_scaling(
    seed: int, global_scale_mode: str
) -> None:
    case = make_case(seed)
    x = case.x.to(torch.bfloat16)
    scale = None if global_scale_mode == "dynamic" else _calibrated_global_scale(seed)
    quantize = nvfp4_activation_quantizer(scale)
    weighted = (x * case.weights.to(torch.bfloat16)).float()

    semantics = llama4_experts(weighted, case)  # unquantized Llama 4
    reference_quantized = llama4_experts(quantize(weighted), case)  # scale, quantize, expert
    prescaled = through_kernel_contract(x, case, torch.float32, quantize)
    naive = cutlass_fused_moe_reference(  # router weight as an output scale (unpatched)
        x, case.ids, case.weights, case.fc1, case.fc2, torch.float32, quantize
    )

    assert torch.equal(prescaled, reference_quantized)
    noise = plain_nvfp4_noise(seed)
    prescaled_err = rel_err(prescaled, semantics)
    naive_err = rel_err(naive, semantics)
    # Measured: pre-scaled error / plain noise in 0.96..1.02; naive / pre-scaled about 5.6..6.
    assert 0.8 * noise <= prescaled_err <= 1.2 * noise
    assert naive_err >= 4 * prescaled_err
    assert rel_err(naive, reference_quantized) >= 3 * noise
