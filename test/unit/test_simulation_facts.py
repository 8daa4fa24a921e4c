"""Pure facts the CPU simulation relies on: how Llama 4 and Gemma 4 build their MoE layer
(read off a config), which GPUs cubins built for an architecture list run on, and the gated
activations of the kernel reference."""

from __future__ import annotations

import pytest
import torch

from sglang_nvfp4_patches.reference.cutlass_moe_contract import gated_expert
from sglang_nvfp4_patches.simulation.moe_models import moe_model
from sglang_nvfp4_patches.simulation.uncomputed_kernels import has_cubins_for

BLACKWELL = ("Sm100a", "Sm100f", "Sm103a")  # FlashInfer 0.7.2's trtllm-gen MoE cubins


@pytest.mark.parametrize(
    ("capability", "runs"),
    [
        ((10, 0), True),
        ((10, 3), True),
        ((10, 1), True),
        ((11, 0), False),
        ((12, 0), False),
        ((12, 1), False),
        ((9, 0), False),
    ],
)
def test_cubins_run_on_their_architecture_or_family(
    capability: tuple[int, int], runs: bool
) -> None:
    assert has_cubins_for(capability, BLACKWELL) is runs
    assert has_cubins_for((10, 3), ("Sm100a",)) is False  # an "a" build is one GPU only


def test_llama4_routes_its_weight_on_the_input_and_gemma4_only_with_moe_blocks() -> None:
    llama = moe_model(
        {
            "architectures": ["Llama4ForConditionalGeneration"],
            "text_config": {"num_experts_per_tok": 1},
        }
    )
    assert llama is not None and llama.router_weight_on_input and llama.top_k == 1
    assert llama.fused_moe_args["apply_router_weight_on_input"] is True
    assert "top_k" not in llama.fused_moe_args  # Llama 4 builds FusedMoE without top_k
    gemma = {
        "architectures": ["Gemma4ForConditionalGeneration"],
        "text_config": {"enable_moe_block": True, "top_k_experts": 8},
    }
    built = moe_model(gemma)
    assert built is not None and built.gate_activation == "Geglu" and built.top_k == 8
    assert not built.router_weight_on_input
    gemma["text_config"]["enable_moe_block"] = False
    assert moe_model(gemma) is None
    assert moe_model({"architectures": ["Qwen3MoeForCausalLM"]}) is None


def test_the_gated_experts_are_silu_and_exact_gelu_of_the_gate_times_up() -> None:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(3, 8, generator=generator)
    fc1 = torch.randn(2 * 4, 8, generator=generator)  # [up; gate]
    fc2 = torch.randn(8, 4, generator=generator)
    up, gate = x @ fc1[:4].t(), x @ fc1[4:].t()
    silu = gate / (1 + torch.exp(-gate))
    gelu = 0.5 * gate * (1 + torch.erf(gate / 2**0.5))
    assert torch.allclose(gated_expert(x, fc1, fc2), (silu * up) @ fc2.t(), atol=1e-5)
    assert torch.allclose(gated_expert(x, fc1, fc2, "Geglu"), (gelu * up) @ fc2.t(), atol=1e-5)
