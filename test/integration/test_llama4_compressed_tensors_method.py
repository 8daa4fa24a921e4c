"""Compressed-tensors NVFP4 MoE (llm-compressor Llama 4) on the FlashInfer CUTLASS runner.

SGLang's real ``CompressedTensorsConfig`` parses the bundled stand-in checkpoint config, picks
``CompressedTensorsW4A4Nvfp4MoE`` for the MoE layer, creates and post-processes its weights,
builds its ``MoeRunner`` and runs ``apply`` through the fused-function registry. Only the
FlashInfer kernel is replaced (the CPU reference of its contract; NVFP4 weights with unit
scales decode exactly). Results are compared with Llama 4's semantics ``expert(x * w)``,
computed here from the weight values the test chose.

Where the record for this SGLang shows the lifted layer computing something other than
``expert(x * w)`` (0.5.16, whose loader keeps W13 as ``[gate; up]``), every such layer is
refused when it is built; the other W13 order, planted, is what the evidence catches.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import importlib
import inspect
import weakref
from collections.abc import Iterator
from typing import Any

import pytest
import torch

from sglang_nvfp4_patches.llama4_router_weight import evidence
from sglang_nvfp4_patches.llama4_router_weight.commands import current_state
from sglang_nvfp4_patches.llama4_router_weight.refusals import (
    LiftedLayerWrongError,
    TopKNotOneError,
)
from sglang_nvfp4_patches.llama4_router_weight.rule import COMPRESSED_TENSORS
from sglang_nvfp4_patches.patch_report import PatchState
from sglang_nvfp4_patches.simulation.cutlass_kernel import (
    cpu_cutlass_kernel,
    cuda_moves_stay_on_cpu,
)
from sglang_nvfp4_patches.simulation.gpus import GPU_PROFILES, device_capability
from sglang_nvfp4_patches.simulation.llama4_layers import (
    EXPERTS,
    HIDDEN,
    INTERMEDIATE,
    compressed_tensors_layer,
    runs_on_flashinfer_cutlass,
)
from sglang_nvfp4_patches.supported_releases import sglang_version
from support.configs import LLAMA4_NVFP4_CT
from support.release import recorded_llama4_state, shipped_llama4_serving
from support.sglang_cpu import (
    needs_runner_module,
    scheduler_on,
)

TOKENS = 7
pytestmark = [pytest.mark.release_matrix, needs_runner_module()]
# The record's states (evidence.py): the lifted layer computes wrong; it serves.
LIFTED_WRONG, LIFT_SERVES = "lifted, wrong", "lift serves"
NOT_REJECTED = ("upstream", "other runner")  # SGLang's own layer serves, or is not on CUTLASS
REFUSED_HERE = "test_where_the_record_shows_the_lifted_layer_wrong_it_is_refused_when_built"


def recorded_state() -> str | None:
    return recorded_llama4_state(COMPRESSED_TENSORS.part)


def builds_flashinfer_cutlass_runner(scheme_cls: type) -> bool:
    """Whether the scheme's own ``create_moe_runner`` can build the FlashInfer CUTLASS runner
    (read from SGLang's source, through the plugin's hook)."""
    return "FLASHINFER_CUTLASS" in inspect.getsource(scheme_cls.create_moe_runner)


class CompressedTensorsLayer:
    """One Llama 4 MoE layer as SGLang builds it from a compressed-tensors NVFP4 checkpoint
    (``simulation.llama4_layers``: the scheme creates its weights, filled with FP4 codes and
    unit scales)."""

    def __init__(self, kernel: Any, top_k: int, seed: int = 0) -> None:
        self.kernel = kernel
        self.moe = compressed_tensors_layer(top_k=top_k, seed=seed)
        self.layer, self.method = self.moe.layer, self.moe.method
        self.scheme = self.layer.scheme
        self.runner_config = self.moe.runner_config
        self.w13, self.w2 = self.moe.w13, self.moe.w2

    def build(self) -> None:
        """FusedMoE's order: runner, then the weights' post-processing (after loading)."""
        try:
            self.moe.build()
        except LiftedLayerWrongError:
            if recorded_state() != LIFTED_WRONG:
                raise
            pytest.skip(f"not applicable: the layer is refused on this release ({REFUSED_HERE})")
        if not runs_on_flashinfer_cutlass(self.moe):
            backend = getattr(getattr(self.scheme, "runner", None), "runner_backend", None)
            # Only a scheme that cannot build that runner at all may skip (0.5.15.post1's
            # runs SGLang's own CUTLASS kernel on a triton runner and honours the flag).
            assert not builds_flashinfer_cutlass_runner(type(self.scheme)), (
                "this SGLang's compressed-tensors NVFP4 MoE scheme builds the FlashInfer "
                f"CUTLASS runner, but not on a simulated SM120 Llama 4 (runner: {backend})"
            )
            pytest.skip(
                "not applicable: this SGLang's compressed-tensors NVFP4 MoE scheme does not run "
                f"on the FlashInfer CUTLASS MoE runner (runner: {backend})"
            )
        self.method.process_weights_after_loading(self.layer)

    def apply(self, x: torch.Tensor, weights: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        return self.moe.apply(x, weights, ids)


@contextlib.contextmanager
def sm120_scheduler() -> Iterator[Any]:
    """A simulated SM120 scheduler serving the compressed-tensors Llama 4 config."""
    with (
        cpu_cutlass_kernel() as kernel,
        cuda_moves_stay_on_cpu(),
        device_capability(GPU_PROFILES["sm120"]),
        scheduler_on("sm120", LLAMA4_NVFP4_CT),
    ):
        yield kernel


@pytest.fixture
def on_sm120() -> Iterator[Any]:
    with sm120_scheduler() as kernel:
        yield kernel


def top1_batch(dtype: torch.dtype, seed: int) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(100 + seed)
    x = torch.randn(TOKENS, HIDDEN, generator=generator).to(dtype)
    weights = torch.rand(TOKENS, 1, generator=generator) * 0.9 + 0.1
    ids = torch.randint(0, EXPERTS, (TOKENS, 1), generator=generator, dtype=torch.int32)
    return x, weights, ids


def llama4_expert(x: torch.Tensor, w13: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    """One SwiGLU expert on one token in float32, written out by hand (rows: [up; gate])."""
    h = w13 @ x.float()
    up, gate = h[:INTERMEDIATE], h[INTERMEDIATE:]
    return w2 @ (gate * torch.sigmoid(gate) * up)


@pytest.mark.parametrize(
    ("dtype", "tolerance"), [(torch.float32, 1e-4), (torch.bfloat16, 2e-2)], ids=["fp32", "bf16"]
)
@pytest.mark.parametrize("seed", [0, 1])
def test_llama4_layer_computes_expert_of_scaled_input(
    on_sm120: Any, dtype: torch.dtype, tolerance: float, seed: int
) -> None:
    moe = CompressedTensorsLayer(on_sm120, top_k=1, seed=seed)
    moe.build()
    x, weights, ids = top1_batch(dtype, seed)
    out = moe.apply(x, weights, ids)
    expected = torch.stack(
        [
            llama4_expert(x[t] * weights[t, 0].to(dtype), moe.w13[ids[t, 0]], moe.w2[ids[t, 0]])
            for t in range(TOKENS)
        ]
    ).to(dtype)
    assert out.dtype == dtype and out.shape == expected.shape
    torch.testing.assert_close(out.float(), expected.float(), rtol=tolerance, atol=tolerance)
    (call,) = on_sm120.calls
    # the router weight is applied exactly once, on the input; the kernel only adds unit scales
    assert torch.equal(call["input"], x * weights.to(dtype))
    assert call["token_final_scales"].dtype == torch.float32
    assert torch.equal(call["token_final_scales"], torch.ones(TOKENS, 1))
    assert torch.equal(call["token_selected_experts"].long(), ids.long())


def test_the_runner_keeps_the_flag_and_the_scheme_sees_it_lifted(on_sm120: Any) -> None:
    moe = CompressedTensorsLayer(on_sm120, top_k=1)
    moe.build()
    assert moe.scheme.runner.config is moe.runner_config
    assert moe.runner_config.apply_router_weight_on_input
    assert not moe.scheme.moe_runner_config.apply_router_weight_on_input


def test_top2_with_the_flag_is_refused_where_the_layer_is_built(on_sm120: Any) -> None:
    moe = CompressedTensorsLayer(on_sm120, top_k=2)
    with pytest.raises(TopKNotOneError, match="top_k=2"):
        moe.build()


def test_unpatched_sglang_rejects_the_flag(on_sm120: Any) -> None:
    """SGLang's own create_moe_runner (what the hook wraps) leaves the rejection in place."""
    moe = CompressedTensorsLayer(on_sm120, top_k=1)
    scheme_cls = type(moe.scheme)
    if recorded_state() in NOT_REJECTED:
        pytest.skip("not applicable: the record shows this SGLang's scheme not rejecting the flag")
    scheme_cls.create_moe_runner.__wrapped__(moe.scheme, moe.layer, moe.runner_config)
    moe.method.process_weights_after_loading(moe.layer)
    x, weights, ids = top1_batch(torch.bfloat16, 0)
    with pytest.raises(AssertionError, match="apply_router_weight_on_input"):
        moe.apply(x, weights, ids)
    assert on_sm120.calls == []


def test_doctor_state_names_the_compressed_tensors_half() -> None:
    report = current_state()
    if recorded_state() == LIFTED_WRONG:  # never "lifted": what verify says, refused
        assert report.state is PatchState.APPLIED
        assert "compressed-tensors NVFP4 rejection: refused when the layer is built (" in (
            report.reason
        )
    elif recorded_state() in NOT_REJECTED:
        assert "compressed-tensors NVFP4 rejection: none in this release" in report.reason
    else:
        assert "compressed-tensors NVFP4 rejection: lifted" in report.reason


def test_where_the_record_shows_the_lifted_layer_wrong_it_is_refused_when_built(
    on_sm120: Any,
) -> None:
    """Before its weights load, naming the releases the shipped records show serving it and
    the ModelOpt checkpoint this release's record shows serving; SGLang's own check stands."""
    if recorded_state() != LIFTED_WRONG:
        pytest.skip("not applicable: the record for this SGLang shows no lifted layer wrong")
    moe = CompressedTensorsLayer(on_sm120, top_k=1)
    with pytest.raises(LiftedLayerWrongError) as refused:
        moe.moe.build()
    message = str(refused.value)
    assert f"on SGLang {sglang_version()} this MoE layer's {COMPRESSED_TENSORS.cls}" in message
    assert "computes something other than expert(x*w)" in message
    *older, newest = shipped_llama4_serving(COMPRESSED_TENSORS.part)
    assert f"SGLang {', '.join(older)} or {newest} (shown serving there)" in message, message
    assert "a ModelOpt NVFP4 checkpoint of the model" in message
    assert moe.scheme.moe_runner_config is moe.runner_config  # SGLang's own view: the flag
    assert on_sm120.calls == []


@pytest.fixture
def other_w13_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """Planted: the scheme's processed W13 holds its halves the other way round (``[gate;
    up]`` where the CUTLASS kernel reads ``[up; gate]``, or back)."""
    scheme_module = importlib.import_module(COMPRESSED_TENSORS.module)
    scheme_cls = getattr(scheme_module, COMPRESSED_TENSORS.cls)
    process = scheme_cls.process_weights_after_loading

    def swapped(self: Any, layer: Any) -> None:
        process(self, layer)
        w13 = layer.w13_weight.data
        half = w13.shape[-2] // 2
        layer.w13_weight.data = torch.cat([w13[..., half:, :], w13[..., :half, :]], dim=-2)

    monkeypatch.setattr(scheme_cls, "process_weights_after_loading", swapped)


@pytest.mark.usefixtures("other_w13_order")
def test_the_other_w13_order_is_caught_and_the_layer_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where the lifted layer serves, the evidence verify gathers calls the other order
    "lifted, wrong", and a record saying so has every such layer refused when built."""
    if recorded_state() != LIFT_SERVES:
        pytest.skip("not applicable: the record for this SGLang does not show the lift serving")
    fact = evidence.method_fact(COMPRESSED_TENSORS.part)
    assert fact["state"].value == LIFTED_WRONG, fact
    assert fact["lifted"]["detail"].startswith("output != expert(x*w)"), fact
    shipped = evidence.current_facts()
    assert shipped is not None
    part = COMPRESSED_TENSORS.part
    shown = {**shipped.shown, part: fact["state"]}
    serving = {part: evidence.releases_serving(part)}
    planted = dataclasses.replace(shipped, shown=shown, serving=serving)
    monkeypatch.setattr(evidence, "current_facts", lambda: planted)
    with sm120_scheduler() as kernel:
        moe = CompressedTensorsLayer(kernel, top_k=1)
        with pytest.raises(LiftedLayerWrongError, match=r"lifted, the layer computes"):
            moe.moe.build()
        assert kernel.calls == []
    assert "compressed-tensors NVFP4 rejection: refused when the layer is built (" in (
        current_state().reason
    )


@pytest.mark.usefixtures("other_w13_order")
def test_where_the_record_shows_the_lifted_layer_wrong_the_other_w13_order_serves() -> None:
    """The fault the record shows (0.5.16) is the W13 order: with the halves swapped back,
    the lifted layer, loaded as a server loads it, computes expert(x*w)."""
    if recorded_state() != LIFTED_WRONG:
        pytest.skip("not applicable: the record for this SGLang shows no lifted layer wrong")
    fact = evidence.method_fact(COMPRESSED_TENSORS.part)
    assert fact["state"].value == LIFT_SERVES, fact


def test_the_scheme_sees_what_fused_moe_writes_after_building_the_runner(on_sm120: Any) -> None:
    moe = CompressedTensorsLayer(on_sm120, top_k=1)
    moe.build()
    moe.runner_config.runner_backend = moe.scheme.runner.runner_backend  # as FusedMoE does
    moe.runner_config.inplace = False
    seen = moe.scheme.moe_runner_config
    assert seen.runner_backend is moe.runner_config.runner_backend and seen.inplace is False


def test_a_dropped_layer_and_its_method_are_collected(on_sm120: Any) -> None:
    moe = CompressedTensorsLayer(on_sm120, top_k=1)
    moe.build()
    moe.apply(*top1_batch(torch.bfloat16, 0))
    refs = [weakref.ref(obj) for obj in (moe.layer, moe.runner_config, moe.scheme, moe.method)]
    del moe
    gc.collect()
    assert [ref() for ref in refs] == [None] * len(refs)
