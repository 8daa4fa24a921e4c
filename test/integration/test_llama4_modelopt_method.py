"""ModelOpt NVFP4 MoE on the CUTLASS runner: Llama 4's flag no longer stops the layer.

SGLang's real ``ModelOptFp4Config`` / ``ModelOptNvFp4FusedMoEMethod`` build the runner and
run the CUTLASS branch of ``apply``; the FlashInfer kernel is the recording CPU stand-in.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from sglang_nvfp4_patches.simulation.cutlass_kernel import cpu_cutlass_kernel
from sglang_nvfp4_patches.simulation.llama4_layers import EXPERTS, HIDDEN, modelopt_layer
from support.configs import LLAMA4_NVFP4
from support.sglang_cpu import needs_runner_module, scheduler_on

TOKENS = 5
pytestmark = [pytest.mark.release_matrix, needs_runner_module()]


@pytest.fixture
def llama4_moe_method() -> Any:
    """A Llama 4 ModelOpt NVFP4 layer (``simulation.llama4_layers``) on a simulated SM120
    scheduler, with the recording kernel stand-in."""
    with (
        cpu_cutlass_kernel() as kernel,
        scheduler_on("sm120", LLAMA4_NVFP4, quantization="modelopt_fp4"),
    ):
        moe = modelopt_layer()
        yield moe.method, moe.layer, moe.runner_config, kernel


def dispatch_output(weights: torch.Tensor) -> Any:
    from sglang.srt.layers.moe.token_dispatcher.standard import StandardDispatchOutput
    from sglang.srt.layers.moe.topk import StandardTopKOutput

    x = torch.randn(TOKENS, HIDDEN, generator=torch.Generator().manual_seed(3)).bfloat16()
    ids = torch.arange(TOKENS, dtype=torch.int32).remainder(EXPERTS).reshape(TOKENS, 1)
    topk = StandardTopKOutput(topk_weights=weights, topk_ids=ids, router_logits=None)
    return StandardDispatchOutput(hidden_states=x, hidden_states_scale=None, topk_output=topk)


def test_sglang_resolves_cutlass_for_llama4_nvfp4_on_sm120(llama4_moe_method: Any) -> None:
    method, layer, config, _ = llama4_moe_method
    method.create_moe_runner(layer, config)
    assert method.runner.runner_backend.is_flashinfer_cutlass()


def test_apply_runs_with_router_weight_on_input(llama4_moe_method: Any) -> None:
    method, layer, config, kernel = llama4_moe_method
    method.create_moe_runner(layer, config)
    assert method.runner.config.apply_router_weight_on_input  # the runner keeps the flag
    weights = torch.rand(TOKENS, 1, generator=torch.Generator().manual_seed(4)) + 0.1
    dispatch = dispatch_output(weights)
    method.apply(layer, dispatch)
    (call,) = kernel.calls
    assert torch.equal(call["input"], dispatch.hidden_states * weights.bfloat16())
    assert call["token_final_scales"].dtype == torch.float32
    assert torch.equal(call["token_final_scales"], torch.ones(TOKENS, 1))


def test_unpatched_sglang_rejects_the_flag(llama4_moe_method: Any) -> None:
    """SGLang's own create_moe_runner (what the hook wraps) leaves the rejection in place."""
    method, layer, config, kernel = llama4_moe_method
    original = type(method).create_moe_runner.__wrapped__
    original(method, layer, config)
    with pytest.raises(AssertionError, match="apply_router_weight_on_input"):
        method.apply(layer, dispatch_output(torch.rand(TOKENS, 1)))
    assert kernel.calls == []
