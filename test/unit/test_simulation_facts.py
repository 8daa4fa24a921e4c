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


def _deepseek(**fields: object) -> dict[str, object]:
    text = {"n_routed_experts": 8, "num_experts_per_tok": 2, "num_hidden_layers": 6, **fields}
    return {"architectures": ["DeepseekV3ForCausalLM"], **text}


@pytest.mark.parametrize(
    ("fields", "first"),
    [
        ({}, 0),
        ({"first_k_dense_replace": 1}, 1),  # Kimi-K2
        ({"first_k_dense_replace": 3}, 3),  # DeepSeek-V3, GLM-4.5
        ({"first_k_dense_replace": 1, "moe_layer_freq": 2}, 2),
        ({"decoder_sparse_step": 2}, 1),  # every 2nd counted from 1: layers 1, 3, 5
        ({"mlp_only_layers": [0, 1]}, 2),
        ({"interleave_moe_layer_step": 2}, 1),  # Llama 4 Maverick
        ({"hybrid_override_pattern": "M-M*E-"}, 4),  # Nemotron-H
        ({"hybrid_override_pattern": "M-M*-"}, None),
        ({"first_k_dense_replace": 6}, None),  # past its 6 layers: dense
        ({"num_hidden_layers": None, "first_k_dense_replace": 61}, 61),  # the model's default
    ],
)
def test_the_first_moe_layer_is_where_the_models_fields_place_it(
    fields: dict[str, object], first: int | None
) -> None:
    """Once every layer 0 was taken for MoE: Kimi-K2's dense layer 0 (and its ignore list)."""
    model = moe_model(_deepseek(**fields))
    if first is None:
        assert model is None
        return
    assert model is not None and model.index == first
    assert model.prefix == f"model.layers.{first}.mlp.experts"


def test_llama4_names_its_first_moe_layer_as_its_model_does() -> None:
    text = {"num_local_experts": 128, "num_experts_per_tok": 1, "interleave_moe_layer_step": 2}
    config = {"architectures": ["Llama4ForConditionalGeneration"], "text_config": text}
    model = moe_model(config)
    assert model is not None
    assert model.prefix == "language_model.model.layers.1.feed_forward.experts"


def test_nemotron_h_experts_are_relu2_at_the_first_e_of_its_pattern() -> None:
    config = {
        "architectures": ["NemotronHForCausalLM"],
        "n_routed_experts": 8,
        "num_experts_per_tok": 2,
        "hybrid_override_pattern": "M-M*EM",
        "hidden_act": "silu",  # the rest of the model's
        "mlp_hidden_act": "relu2",
    }
    model = moe_model(config)
    assert model is not None and model.index == 4 and model.gate_activation is None
    assert model.fused_moe_args["activation"] == "relu2"
