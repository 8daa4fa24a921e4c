"""Property tests of ``prescale_router_weight_on_input`` (the ``llama4-router-weight`` core)."""

from __future__ import annotations

import gc
import weakref
from dataclasses import dataclass

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from sglang_nvfp4_patches.llama4_router_weight.prescale import (
    as_float32_final_scales,
    prescale_router_weight_on_input,
    unit_final_scales,
)
from sglang_nvfp4_patches.llama4_router_weight.refusals import (
    PreQuantizedActivationsError,
    RouterWeightOnInputError,
    TopKNotOneError,
)
from sglang_nvfp4_patches.reference.cutlass_moe_contract import cutlass_fused_moe_reference

ACT_DTYPES = [torch.bfloat16, torch.float16, torch.float32]
WEIGHT_DTYPES = [torch.bfloat16, torch.float32]
LAYOUTS = ["contiguous", "transposed", "strided", "sliced", "broadcast_row"]


@dataclass(frozen=True)
class Inputs:
    hidden: torch.Tensor
    weights: torch.Tensor


def _hidden_states(
    tokens: int, hidden: int, dtype: torch.dtype, layout: str, seed: int, magnitude: float
) -> torch.Tensor:
    """Hidden states ``[tokens, hidden]`` as a (usually non-contiguous) view of a base tensor."""
    generator = torch.Generator().manual_seed(seed)

    def randn(*shape: int) -> torch.Tensor:
        return (torch.randn(*shape, generator=generator) * magnitude).to(dtype)

    if layout == "transposed":
        return randn(hidden, tokens).t()
    if layout == "strided":
        return randn(tokens, 2 * hidden)[:, ::2]
    if layout == "sliced":
        return randn(tokens + 2, hidden + 16)[1 : tokens + 1, 16:]
    if layout == "broadcast_row":
        return randn(1, hidden).expand(tokens, hidden)
    return randn(tokens, hidden)


@st.composite
def prescale_inputs(draw: st.DrawFn) -> Inputs:
    tokens = draw(st.integers(min_value=0, max_value=33))
    hidden = draw(st.one_of(st.integers(1, 8).map(lambda k: 16 * k), st.just(5120)))
    dtype = draw(st.sampled_from(ACT_DTYPES))
    layout = draw(st.sampled_from(LAYOUTS))
    magnitude = draw(st.sampled_from([1.0, 1e-3, 1e3]))
    seed = draw(st.integers(0, 2**31 - 1))
    weights = draw(
        st.lists(
            st.floats(min_value=0.0, max_value=1.0, exclude_min=True, width=32),
            min_size=tokens,
            max_size=tokens,
        )
    )
    weight_dtype = draw(st.sampled_from(WEIGHT_DTYPES))
    w = torch.tensor(weights, dtype=torch.float32).reshape(tokens, 1).to(weight_dtype)
    return Inputs(_hidden_states(tokens, hidden, dtype, layout, seed, magnitude), w)


def _correctly_rounded_product(hidden: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """``hidden * w`` in the activation dtype, independently: the float64 product of two
    <=24-bit significands is exact, so one rounding to the dtype is the IEEE product."""
    w = weights.to(hidden.dtype).double()
    return (hidden.double() * w).to(hidden.dtype)


@settings(deadline=None, max_examples=200)
@given(prescale_inputs())
def test_prescale_properties(inputs: Inputs) -> None:
    hidden, weights = inputs.hidden, inputs.weights
    hidden_before, weights_before = hidden.clone(), weights.clone()
    hidden_strides, weights_strides = hidden.stride(), weights.stride()

    scaled, unit_scales = prescale_router_weight_on_input(hidden, weights)

    tokens = hidden.shape[0]
    assert scaled.shape == hidden.shape
    assert scaled.dtype == hidden.dtype
    assert torch.equal(scaled, _correctly_rounded_product(hidden_before, weights_before))
    # The FlashInfer binding checks dtypes only and reads the input as row-major.
    assert scaled.is_contiguous()
    assert unit_scales.dtype == torch.float32
    assert unit_scales.shape == (tokens, 1)
    assert unit_scales.is_contiguous()
    assert torch.equal(unit_scales, torch.ones(tokens, 1))
    # Inputs untouched, output is a new tensor.
    assert torch.equal(hidden, hidden_before) and hidden.stride() == hidden_strides
    assert torch.equal(weights, weights_before) and weights.stride() == weights_strides
    if scaled.numel():
        assert scaled.untyped_storage().data_ptr() != hidden.untyped_storage().data_ptr()


@settings(deadline=None, max_examples=60)
@given(
    tokens=st.integers(0, 17),
    experts=st.integers(1, 4),
    seed=st.integers(0, 2**31 - 1),
)
def test_dispatch_keeps_expert_ids(tokens: int, experts: int, seed: int) -> None:
    # The patched dispatch: pre-scale, then the kernel with the *same* ids and unit scales.
    generator = torch.Generator().manual_seed(seed)
    hidden, inter = 32, 16
    x = torch.randn(tokens, hidden, generator=generator)
    w = torch.rand(tokens, 1, generator=generator).clamp_min(1e-3)
    ids = torch.randint(0, experts, (tokens, 1), generator=generator, dtype=torch.int32)
    fc1 = torch.randn(experts, 2 * inter, hidden, generator=generator) / hidden**0.5
    fc2 = torch.randn(experts, hidden, inter, generator=generator) / inter**0.5
    ids_before = ids.clone()

    scaled, unit_scales = prescale_router_weight_on_input(x, w)
    out = cutlass_fused_moe_reference(scaled, ids, unit_scales, fc1, fc2, torch.float32)

    assert torch.equal(ids, ids_before) and ids.dtype == torch.int32
    assert torch.equal(unit_scales, torch.ones(tokens, 1))
    # Each token went to its own expert: recompute token by token with plain torch ops (a
    # wrong expert would be off by O(1); float32 summation order by ~1e-6).
    for t in range(tokens):
        e = int(ids_before[t, 0])
        up, gate = ((x[t] * w[t]) @ fc1[e].t()).split(inter)
        expected = (torch.nn.functional.silu(gate) * up) @ fc2[e].t()
        torch.testing.assert_close(out[t], expected, rtol=1e-4, atol=1e-5)


@settings(deadline=None, max_examples=50)
@given(tokens=st.integers(0, 9), top_k=st.integers(2, 8), dtype=st.sampled_from(ACT_DTYPES))
def test_top_k_above_one_is_refused(tokens: int, top_k: int, dtype: torch.dtype) -> None:
    hidden = torch.ones(tokens, 32, dtype=dtype)
    with pytest.raises(TopKNotOneError, match="top-1"):
        prescale_router_weight_on_input(hidden, torch.full((tokens, top_k), 0.5))


@settings(deadline=None, max_examples=30)
@given(tokens=st.integers(0, 9), top_k=st.integers(1, 2))
def test_prequantized_activations_are_refused(tokens: int, top_k: int) -> None:
    packed = torch.zeros(tokens, 16, dtype=torch.uint8)  # 32 FP4 values per row
    block_scales = torch.zeros(tokens, 2, dtype=torch.uint8)
    with pytest.raises(PreQuantizedActivationsError, match="already quantized"):
        prescale_router_weight_on_input(packed, torch.ones(tokens, top_k), block_scales)


def test_zero_tokens() -> None:
    scaled, unit_scales = prescale_router_weight_on_input(
        torch.empty(0, 5120, dtype=torch.bfloat16), torch.empty(0, 1)
    )
    assert scaled.shape == (0, 5120) and scaled.dtype == torch.bfloat16
    assert unit_scales.shape == (0, 1) and unit_scales.dtype == torch.float32


def test_errors_are_router_weight_errors_and_value_errors() -> None:
    for error in (TopKNotOneError, PreQuantizedActivationsError):
        assert issubclass(error, RouterWeightOnInputError)
    assert issubclass(RouterWeightOnInputError, ValueError)


@pytest.mark.parametrize(
    ("hidden_shape", "weights_shape"),
    [((4, 32), (3, 1)), ((4, 2, 16), (4, 1)), ((32,), (1, 1))],
)
def test_shape_mismatches_are_refused(
    hidden_shape: tuple[int, ...], weights_shape: tuple[int, ...]
) -> None:
    with pytest.raises(RouterWeightOnInputError):
        prescale_router_weight_on_input(torch.ones(hidden_shape), torch.ones(weights_shape))


def test_outgrown_unit_scale_buffers_stay_alive() -> None:
    # A CUDA graph captured with a view of the cached ones buffer keeps reading that address;
    # growing the cache for a longer batch must not free the buffer it replaced.
    first = unit_final_scales(3, torch.device("cpu"))
    old_buffer = first._base
    assert old_buffer is not None
    old_ref = weakref.ref(old_buffer)
    del first, old_buffer
    grown = unit_final_scales(old_ref().shape[0] + 1, torch.device("cpu"))
    gc.collect()
    assert old_ref() is not None
    assert grown._base is not old_ref()
    assert torch.equal(old_ref(), torch.ones_like(old_ref()))
    assert torch.equal(grown, torch.ones_like(grown))


@pytest.mark.parametrize(
    "dtype", [torch.bfloat16, torch.float16, torch.float64], ids=["bf16", "fp16", "fp64"]
)
def test_final_scales_are_cast_to_float32(dtype: torch.dtype) -> None:
    """The FlashInfer binding takes only float32 ``token_final_scales``."""
    weights = (torch.rand(5, 2, generator=torch.Generator().manual_seed(7)) + 0.1).to(dtype)
    before = weights.clone()
    cast = as_float32_final_scales(weights)
    assert cast.dtype == torch.float32 and cast.shape == (5, 2)
    assert torch.equal(cast, torch.tensor(weights.tolist(), dtype=torch.float32))
    assert weights.dtype == dtype and torch.equal(weights, before)  # the input is untouched


def test_float32_final_scales_are_handed_on_as_they_are() -> None:
    weights = torch.rand(5, 1)
    assert as_float32_final_scales(weights) is weights
