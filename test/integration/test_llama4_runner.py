"""Llama 4 on the FlashInfer CUTLASS MoE runner, through SGLang's real runner and types.

Only the FlashInfer kernel is replaced (by a CPU reference of its contract); results are
compared with Llama 4's semantics, ``expert(x * w)``, computed independently here.
"""

from __future__ import annotations

import gc
import importlib
import weakref
from typing import Any

import pytest
import torch

from sglang_nvfp4_patches.llama4_router_weight.flag_free_view import without_router_weight_on_input
from sglang_nvfp4_patches.llama4_router_weight.refusals import (
    PreQuantizedActivationsError,
    TopKNotOneError,
)
from sglang_nvfp4_patches.llama4_router_weight.rule import RUNNER_MODULE, Part, decide
from sglang_nvfp4_patches.llama4_router_weight.runner_registry import (
    CUTLASS_FUSED_FUNC_KEYS,
    FLASHINFER_A2A,
    STANDARD_DISPATCH,
    honour_router_weight_on_input,
    is_patched,
    prequantized_remedies,
)
from sglang_nvfp4_patches.simulation.cutlass_kernel import cpu_cutlass_kernel
from support.configs import LLAMA4_NVFP4
from support.sglang_cpu import (
    a2a_dispatch_switch,
    llama4_runner_config,
    needs_runner_module,
    scheduler_on,
)

HIDDEN, INTERMEDIATE, EXPERTS = 64, 32, 4
pytestmark = [pytest.mark.release_matrix, needs_runner_module()]


@pytest.fixture
def sglang_moe() -> Any:
    """SGLang's MoE types on a simulated SM120 scheduler serving the Llama 4 NVFP4 config."""
    with (
        cpu_cutlass_kernel() as kernel,
        scheduler_on("sm120", LLAMA4_NVFP4, quantization="modelopt_fp4") as args,
    ):
        from sglang.srt.layers.moe.moe_runner.base import MoeRunnerConfig
        from sglang.srt.layers.moe.moe_runner.flashinfer_cutlass import (
            FlashInferCutlassMoeQuantInfo,
        )
        from sglang.srt.layers.moe.moe_runner.runner import MoeRunner
        from sglang.srt.layers.moe.token_dispatcher.standard import StandardDispatchOutput
        from sglang.srt.layers.moe.topk import StandardTopKOutput
        from sglang.srt.layers.moe.utils import MoeRunnerBackend

        yield type(
            "SGLangMoE",
            (),
            dict(
                kernel=kernel,
                server_args=args,
                MoeRunnerConfig=MoeRunnerConfig,
                QuantInfo=FlashInferCutlassMoeQuantInfo,
                MoeRunner=MoeRunner,
                DispatchOutput=StandardDispatchOutput,
                TopKOutput=StandardTopKOutput,
                CUTLASS=MoeRunnerBackend.FLASHINFER_CUTLASS,
            ),
        )


def runner_config(moe: Any, top_k: int, on_input: bool) -> Any:
    return llama4_runner_config(EXPERTS, HIDDEN, INTERMEDIATE, top_k=top_k, on_input=on_input)


def make_batch(moe: Any, tokens: int, top_k: int, dtype: torch.dtype, seed: int = 0) -> dict:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(tokens, HIDDEN, generator=generator).to(dtype)
    weights = torch.rand(tokens, top_k, generator=generator) * 0.9 + 0.1
    ids = torch.argsort(torch.rand(tokens, EXPERTS, generator=generator), dim=1)[:, :top_k]
    ids = ids.to(torch.int32)
    w13 = (torch.randn(EXPERTS, 2 * INTERMEDIATE, HIDDEN, generator=generator) / 8).to(dtype)
    w2 = (torch.randn(EXPERTS, HIDDEN, INTERMEDIATE, generator=generator) / 8).to(dtype)
    return dict(x=x, weights=weights, ids=ids, w13=w13, w2=w2)


def dispatch(moe: Any, batch: dict, weights: torch.Tensor | None = None, scale: Any = None) -> Any:
    topk = moe.TopKOutput(
        topk_weights=batch["weights"] if weights is None else weights,
        topk_ids=batch["ids"],
        router_logits=torch.zeros(batch["x"].shape[0], EXPERTS),
    )
    return moe.DispatchOutput(hidden_states=batch["x"], hidden_states_scale=scale, topk_output=topk)


def run(moe: Any, batch: dict, config: Any, **dispatch_kwargs: Any) -> torch.Tensor:
    quant_info = moe.QuantInfo(quant_type="bf16", w13_weight=batch["w13"], w2_weight=batch["w2"])
    runner = moe.MoeRunner(moe.CUTLASS, config)
    return runner.run(dispatch(moe, batch, **dispatch_kwargs), quant_info).hidden_states


def expert(x: torch.Tensor, w13: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    """One SwiGLU expert on one token, float32, written out by hand (fc1 rows = [up; gate])."""
    h = w13.float() @ x.float()
    up, gate = h[:INTERMEDIATE], h[INTERMEDIATE:]
    return w2.float() @ (gate * torch.sigmoid(gate) * up)


def llama4_semantics(batch: dict) -> torch.Tensor:
    """Router weight on the input: expert(x * w), with x * w in the activations' dtype."""
    x, w, ids = batch["x"], batch["weights"], batch["ids"]
    rows = []
    for t in range(x.shape[0]):
        scaled = x[t] * w[t, 0].to(x.dtype)
        rows.append(expert(scaled, batch["w13"][ids[t, 0]], batch["w2"][ids[t, 0]]))
    return torch.stack(rows).to(x.dtype) if rows else torch.empty(0, HIDDEN, dtype=x.dtype)


def output_weighted_semantics(batch: dict) -> torch.Tensor:
    x, w, ids = batch["x"], batch["weights"], batch["ids"]
    rows = []
    for t in range(x.shape[0]):
        total = torch.zeros(HIDDEN)
        for k in range(ids.shape[1]):
            total += w[t, k].float() * expert(x[t], batch["w13"][ids[t, k]], batch["w2"][ids[t, k]])
        rows.append(total)
    return torch.stack(rows).to(x.dtype)


def runner_is_upstream() -> bool:
    """Whether the record for this SGLang shows its own runner pre-scaling (0.5.21+)."""
    from sglang_nvfp4_patches.llama4_router_weight.evidence import current_facts

    return not decide(current_facts(), Part.RUNNER).act


@pytest.mark.parametrize(
    ("dtype", "tolerance"), [(torch.float32, 1e-5), (torch.bfloat16, 1e-2)], ids=["fp32", "bf16"]
)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_top1_router_weight_on_input_matches_llama4(
    sglang_moe: Any, dtype: torch.dtype, tolerance: float, seed: int
) -> None:
    batch = make_batch(sglang_moe, tokens=9, top_k=1, dtype=dtype, seed=seed)
    out = run(sglang_moe, batch, runner_config(sglang_moe, 1, on_input=True))
    expected = llama4_semantics(batch)
    assert out.dtype == dtype and out.shape == expected.shape
    torch.testing.assert_close(out, expected, rtol=tolerance, atol=tolerance)
    # and it is not what output-side weighting would give
    assert not torch.allclose(out.float(), output_weighted_semantics(batch).float(), atol=1e-2)


def test_kernel_gets_prescaled_input_unit_float32_scales_and_unchanged_ids(sglang_moe: Any) -> None:
    batch = make_batch(sglang_moe, tokens=6, top_k=1, dtype=torch.bfloat16)
    weights_before, ids_before = batch["weights"].clone(), batch["ids"].clone()
    run(sglang_moe, batch, runner_config(sglang_moe, 1, on_input=True))
    (call,) = sglang_moe.kernel.calls
    assert torch.equal(call["input"], batch["x"] * batch["weights"].to(torch.bfloat16))
    scales = call["token_final_scales"]
    assert scales.dtype == torch.float32 and torch.equal(scales, torch.ones(6, 1))
    assert torch.equal(call["token_selected_experts"].long(), batch["ids"].long())
    assert torch.equal(batch["weights"], weights_before) and torch.equal(batch["ids"], ids_before)


@pytest.mark.parametrize("weights_dtype", [torch.bfloat16, torch.float32])
def test_output_weighting_is_unchanged_apart_from_float32_scales(
    sglang_moe: Any, weights_dtype: torch.dtype
) -> None:
    batch = make_batch(sglang_moe, tokens=7, top_k=2, dtype=torch.bfloat16)
    batch["weights"] = batch["weights"].to(weights_dtype)
    out = run(sglang_moe, batch, runner_config(sglang_moe, 2, on_input=False))
    (call,) = sglang_moe.kernel.calls
    assert call["token_final_scales"].dtype == torch.float32
    assert torch.equal(call["token_final_scales"], batch["weights"].float())
    assert torch.equal(call["input"], batch["x"])
    torch.testing.assert_close(out, output_weighted_semantics(batch), rtol=1e-2, atol=1e-2)


def test_top2_with_router_weight_on_input_is_refused(sglang_moe: Any) -> None:
    batch = make_batch(sglang_moe, tokens=4, top_k=2, dtype=torch.bfloat16)
    expected = AssertionError if runner_is_upstream() else TopKNotOneError
    with pytest.raises(expected, match=r"(?i)top-?k ?=? ?1|top-1"):
        run(sglang_moe, batch, runner_config(sglang_moe, 2, on_input=True))
    assert sglang_moe.kernel.calls == []


def test_prequantized_activations_are_refused_naming_the_switch(sglang_moe: Any) -> None:
    """Standard dispatch: the FP4 all-gather quantized them; the error names its off switch."""
    batch = make_batch(sglang_moe, tokens=4, top_k=1, dtype=torch.bfloat16)
    scale = torch.ones(4, HIDDEN // 16, dtype=torch.uint8)
    expected = NotImplementedError if runner_is_upstream() else PreQuantizedActivationsError
    with pytest.raises(expected, match="quantized before dispatch") as refused:
        run(sglang_moe, batch, runner_config(sglang_moe, 1, on_input=True), scale=scale)
    assert sglang_moe.kernel.calls == []
    if not runner_is_upstream():
        assert "--disable-flashinfer-cutlass-moe-fp4-allgather" in str(refused.value)
        assert hasattr(sglang_moe.server_args, "disable_flashinfer_cutlass_moe_fp4_allgather")


def test_nvfp4_all_to_all_dispatch_is_refused_naming_its_switch(sglang_moe: Any) -> None:
    """FlashInfer all-to-all: its NVFP4 dispatch quantized them."""
    if runner_is_upstream():
        pytest.skip("not applicable: SGLang's own runner owns this check from 0.5.21 on")
    from sglang.srt.environ import envs
    from sglang.srt.layers.moe.moe_runner.base import FusedOpPool
    from sglang.srt.layers.moe.token_dispatcher.flashinfer import FlashinferDispatchOutput

    batch = make_batch(sglang_moe, tokens=4, top_k=1, dtype=torch.bfloat16)
    dispatch_output = FlashinferDispatchOutput(
        hidden_states=batch["x"],
        hidden_states_scale=torch.ones(4, HIDDEN // 16, dtype=torch.uint8),
        topk_output=dispatch(sglang_moe, batch).topk_output,
    )
    quant_info = sglang_moe.QuantInfo(
        quant_type="bf16", w13_weight=batch["w13"], w2_weight=batch["w2"]
    )
    fused_func = FusedOpPool._fused_funcs[FLASHINFER_A2A]
    with pytest.raises(PreQuantizedActivationsError) as refused:
        fused_func(dispatch_output, quant_info, runner_config(sglang_moe, 1, on_input=True))
    assert a2a_dispatch_switch() in str(refused.value)
    assert hasattr(envs, "SGLANG_MOE_NVFP4_DISPATCH")
    assert sglang_moe.kernel.calls == []


def test_zero_tokens(sglang_moe: Any) -> None:
    batch = make_batch(sglang_moe, tokens=0, top_k=1, dtype=torch.bfloat16)
    out = run(sglang_moe, batch, runner_config(sglang_moe, 1, on_input=True))
    assert out.shape == (0, HIDDEN)


def test_registry_holds_sglangs_own_functions_where_upstream_has_the_fix() -> None:
    runner = importlib.import_module(RUNNER_MODULE)
    from sglang.srt.layers.moe.moe_runner.base import FusedOpPool

    funcs = [FusedOpPool._fused_funcs[key] for key in CUTLASS_FUSED_FUNC_KEYS]
    if runner_is_upstream():
        assert funcs[0] is runner.fused_experts_none_to_flashinfer_cutlass
        assert funcs[1] is runner.fused_experts_flashinfer_to_flashinfer_cutlass
    else:
        assert all(is_patched(f) for f in funcs)
        assert funcs[0].__wrapped__ is runner.fused_experts_none_to_flashinfer_cutlass


def test_flag_free_view_reads_every_later_write_to_the_config(sglang_moe: Any) -> None:
    """What FusedMoE writes into the config after building the runner is seen at once."""
    config = runner_config(sglang_moe, 1, on_input=True)
    view = without_router_weight_on_input(config)
    assert isinstance(view, sglang_moe.MoeRunnerConfig)
    assert not view.apply_router_weight_on_input and config.apply_router_weight_on_input
    config.num_local_experts = 2
    config.runner_backend = sglang_moe.CUTLASS
    config.inplace = False
    assert (view.num_local_experts, view.runner_backend, view.inplace) == (
        2,
        sglang_moe.CUTLASS,
        False,
    )
    view.apply_router_weight_on_input = True  # ignored: the view never carries the flag
    assert not view.apply_router_weight_on_input and config.apply_router_weight_on_input


def test_a_dropped_layer_and_its_config_are_collected(sglang_moe: Any) -> None:
    """Nothing at module level keeps a layer alive once its model is dropped."""
    batch = make_batch(sglang_moe, tokens=3, top_k=1, dtype=torch.bfloat16)
    config = runner_config(sglang_moe, 1, on_input=True)
    layer = getattr(config, "layer", None) or torch.nn.Module()  # 0.5.15: no layer field
    run(sglang_moe, batch, config)
    layer_ref, config_ref = weakref.ref(layer), weakref.ref(config)
    del layer, config
    gc.collect()
    assert layer_ref() is None and config_ref() is None


# ---------------------------------------------------------------- the plugin's own wrapper
# From 0.5.21 SGLang pre-scales top-1 itself and the plugin leaves its registry alone, so the
# tests above check SGLang's pre-scale there. These wrap SGLang's real registered functions
# with the plugin's wrapper on every release, recording what the wrapper hands them.

SGLANGS_OWN = {
    STANDARD_DISPATCH: "fused_experts_none_to_flashinfer_cutlass",
    FLASHINFER_A2A: "fused_experts_flashinfer_to_flashinfer_cutlass",
}


class Handed:
    """SGLang's own fused function, recording what it is handed before running it."""

    def __init__(self, sglang_func: Any) -> None:
        self.sglang_func = sglang_func
        self.calls: list[tuple[Any, bool]] = []

    def __call__(self, dispatch_output: Any, quant_info: Any, config: Any) -> Any:
        self.calls.append((dispatch_output, config.apply_router_weight_on_input))
        return self.sglang_func(dispatch_output, quant_info, config)


@pytest.fixture
def plugin_wrapped(sglang_moe: Any, monkeypatch: pytest.MonkeyPatch) -> dict[Any, Handed]:
    """The registry holds the plugin's wrapper around SGLang's own functions, on any release."""
    from sglang.srt.layers.moe.moe_runner.base import FusedOpPool

    runner = importlib.import_module(RUNNER_MODULE)
    remedies = prequantized_remedies()
    handed = {}
    for key, name in SGLANGS_OWN.items():
        handed[key] = Handed(getattr(runner, name))
        wrapper = honour_router_weight_on_input(handed[key], remedies[key])
        monkeypatch.setitem(FusedOpPool._fused_funcs, key, wrapper)
    return handed


@pytest.mark.parametrize(
    ("dtype", "tolerance"), [(torch.float32, 1e-5), (torch.bfloat16, 1e-2)], ids=["fp32", "bf16"]
)
def test_plugin_wrapper_prescales_top1_before_sglangs_function(
    sglang_moe: Any, plugin_wrapped: dict, dtype: torch.dtype, tolerance: float
) -> None:
    batch = make_batch(sglang_moe, tokens=9, top_k=1, dtype=dtype, seed=3)
    out = run(sglang_moe, batch, runner_config(sglang_moe, 1, on_input=True))
    torch.testing.assert_close(out, llama4_semantics(batch), rtol=tolerance, atol=tolerance)
    # SGLang's function gets the scaled input, unit float32 scales and no flag: its own
    # pre-scale (0.5.21+) has nothing left to do, so the result above is the plugin's.
    ((dispatched, flag),) = plugin_wrapped[STANDARD_DISPATCH].calls
    scaled = batch["x"] * batch["weights"].to(dtype)
    assert flag is False
    assert torch.equal(dispatched.hidden_states, scaled)
    weights = dispatched.topk_output.topk_weights
    assert weights.dtype == torch.float32 and torch.equal(weights, torch.ones(9, 1))
    (call,) = sglang_moe.kernel.calls
    assert torch.equal(call["input"], scaled)


@pytest.mark.parametrize(
    "weights_dtype", [torch.bfloat16, torch.float16, torch.float32], ids=["bf16", "fp16", "fp32"]
)
def test_plugin_wrapper_hands_float32_final_scales(
    sglang_moe: Any, plugin_wrapped: dict, weights_dtype: torch.dtype
) -> None:
    batch = make_batch(sglang_moe, tokens=7, top_k=2, dtype=torch.bfloat16, seed=4)
    batch["weights"] = batch["weights"].to(weights_dtype)
    out = run(sglang_moe, batch, runner_config(sglang_moe, 2, on_input=False))
    ((dispatched, flag),) = plugin_wrapped[STANDARD_DISPATCH].calls
    weights = dispatched.topk_output.topk_weights
    assert flag is False and weights.dtype == torch.float32
    assert torch.equal(weights, batch["weights"].float())
    if weights_dtype == torch.float32:
        assert weights is batch["weights"]  # already float32: handed on as is
    assert torch.equal(dispatched.hidden_states, batch["x"])
    torch.testing.assert_close(out, output_weighted_semantics(batch), rtol=1e-2, atol=1e-2)


def test_plugin_wrapper_refuses_top2_with_its_own_message(
    sglang_moe: Any, plugin_wrapped: dict
) -> None:
    batch = make_batch(sglang_moe, tokens=4, top_k=2, dtype=torch.bfloat16)
    with pytest.raises(TopKNotOneError, match=r"topk_weights of shape \(4, 2\)") as refused:
        run(sglang_moe, batch, runner_config(sglang_moe, 2, on_input=True))
    assert "top-1" in str(refused.value) and "--moe-runner-backend" in str(refused.value)
    assert plugin_wrapped[STANDARD_DISPATCH].calls == [] and sglang_moe.kernel.calls == []


@pytest.mark.parametrize(
    ("key", "switch"),
    [
        (STANDARD_DISPATCH, "--disable-flashinfer-cutlass-moe-fp4-allgather"),
        (FLASHINFER_A2A, None),  # per release: a2a_dispatch_switch()
    ],
    ids=["fp4-allgather", "a2a-nvfp4-dispatch"],
)
def test_plugin_wrapper_refuses_prequantized_activations_naming_the_switch(
    sglang_moe: Any, plugin_wrapped: dict, key: tuple, switch: str | None
) -> None:
    from sglang.srt.environ import envs
    from sglang.srt.layers.moe.moe_runner.base import FusedOpPool

    batch = make_batch(sglang_moe, tokens=4, top_k=1, dtype=torch.bfloat16)
    scale = torch.ones(4, HIDDEN // 16, dtype=torch.uint8)
    quant_info = sglang_moe.QuantInfo(
        quant_type="bf16", w13_weight=batch["w13"], w2_weight=batch["w2"]
    )
    config = runner_config(sglang_moe, 1, on_input=True)
    with pytest.raises(PreQuantizedActivationsError, match="quantized before dispatch") as refused:
        FusedOpPool._fused_funcs[key](dispatch(sglang_moe, batch, scale=scale), quant_info, config)
    assert (switch or a2a_dispatch_switch()) in str(refused.value)
    # the switch named is one this SGLang really has
    assert hasattr(sglang_moe.server_args, "disable_flashinfer_cutlass_moe_fp4_allgather")
    assert hasattr(envs, "SGLANG_MOE_NVFP4_DISPATCH")
    assert plugin_wrapped[key].calls == [] and sglang_moe.kernel.calls == []
