"""Config directories for tests: the bundled stand-ins, or edited copies of them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sglang_nvfp4_patches.simulation.bundled import (
    EXAMPLES_DIR,
    GEMMA4_NVFP4_MOE,
    LLAMA4_NVFP4,
    LLAMA4_NVFP4_CT,
    QWEN3_MOE_NVFP4,
)

__all__ = ["GEMMA4_NVFP4_MOE", "LLAMA4_NVFP4", "LLAMA4_NVFP4_CT"]

EXAMPLES = EXAMPLES_DIR
GEMMA4_BF16_MOE = EXAMPLES / "gemma-4-26b-a4b-it"
GEMMA4_NVFP4_DENSE = EXAMPLES / "gemma-4-31b-it-nvfp4"
ALL_BUNDLED = (GEMMA4_NVFP4_MOE, GEMMA4_BF16_MOE, GEMMA4_NVFP4_DENSE, LLAMA4_NVFP4)

_MISSING = object()


def edited_copy(source: Path, target: Path, **text_config: Any) -> Path:
    """Copy ``source``'s config.json into ``target`` with text_config keys set (or removed
    when the value is ``edited_copy.REMOVE``)."""
    config = json.loads((source / "config.json").read_text())
    for key, value in text_config.items():
        if value is REMOVE:
            config["text_config"].pop(key, None)
        else:
            config["text_config"][key] = value
    target.mkdir(parents=True, exist_ok=True)
    (target / "config.json").write_text(json.dumps(config))
    return target


REMOVE = _MISSING


def hf_quant_copy(source: Path, target: Path) -> Path:
    """Copy ``source``'s ModelOpt checkpoint config with its quantization moved out of
    config.json into ``hf_quant_config.json`` beside it, as ModelOpt exports it."""
    config = json.loads((source / "config.json").read_text())
    quantization = config.pop("quantization_config")
    quantization.pop("quant_method", None)
    target.mkdir(parents=True, exist_ok=True)
    (target / "config.json").write_text(json.dumps(config))
    exported = {"producer": {"name": "modelopt"}, "quantization": quantization}
    (target / "hf_quant_config.json").write_text(json.dumps(exported))
    return target


def merged(source: Path, edit: dict[str, Any]) -> dict[str, Any]:
    """``source``'s config.json with ``edit``: an object merges into the object it names."""
    return _with(json.loads((source / "config.json").read_text()), edit)


def _with(config: dict[str, Any], edit: dict[str, Any]) -> dict[str, Any]:
    for key, value in edit.items():
        if isinstance(value, dict) and isinstance(config.get(key), dict):
            config[key].update(value)
        else:
            config[key] = value
    return config


# Fields SGLang reads past (transformers' to_dict() writes several of them as null) or reads
# without failing, each as an edit of a bundled config: never refused.
UNREAD_FIELDS: list[tuple[Path, dict[str, Any]]] = [
    (LLAMA4_NVFP4, {"text_config": {"architectures": None}}),
    (LLAMA4_NVFP4, {"text_config": {"architectures": "Llama4ForCausalLM"}}),
    (LLAMA4_NVFP4, {"text_config": {"text_config": "nested"}}),
    (LLAMA4_NVFP4, {"vision_config": {"architectures": None, "dtype": None}}),
    (LLAMA4_NVFP4, {"hidden_size": None, "num_hidden_layers": 0}),  # the text model's are read
    (LLAMA4_NVFP4, {"num_experts_per_tok": "8", "num_local_experts": [16]}),
    (LLAMA4_NVFP4, {"text_config": {"top_k_experts": "8"}}),  # Gemma 4's field, not Llama 4's
    (QWEN3_MOE_NVFP4, {"top_k_experts": "8"}),
    (
        LLAMA4_NVFP4,
        {"_name_or_path": None, "transformers_version": 5, "torch_dtype": None, "problem_type": 0},
    ),
    (LLAMA4_NVFP4, {"text_config": {"hidden_size": 0}}),  # read: bounds are SGLang's own
    (QWEN3_MOE_NVFP4, {"hidden_size": -1, "num_hidden_layers": 0}),
]


MOE_EXAMPLES = Path(__file__).parents[2] / "examples"
DEEPSEEK_V3_NVFP4 = MOE_EXAMPLES / "deepseek-v3-nvfp4"
GLM45_AIR_NVFP4 = MOE_EXAMPLES / "glm-4.5-air-nvfp4"
# MoE families beyond the stand-ins above, by architecture: their model type and their MoE
# counts as published checkpoints set them (any other field: the config class's default).
FAMILY_FIELDS: dict[str, dict[str, Any]] = {
    "Qwen2MoeForCausalLM": {"model_type": "qwen2_moe", "num_experts": 60, "num_experts_per_tok": 4},
    "Qwen3VLMoeForConditionalGeneration": {
        "model_type": "qwen3_vl_moe",
        "text_config": {"num_experts": 128, "num_experts_per_tok": 8},
    },
    "MiniMaxM2ForCausalLM": {
        "model_type": "minimax_m2",
        "num_local_experts": 256,
        "num_experts_per_tok": 8,
    },
    "GptOssForCausalLM": {
        "model_type": "gpt_oss",
        "num_local_experts": 32,
        "num_experts_per_tok": 4,
    },
    "DeepseekV2ForCausalLM": {
        "model_type": "deepseek_v2",
        "n_routed_experts": 64,
        "num_experts_per_tok": 6,
        "first_k_dense_replace": 1,
        "moe_layer_freq": 1,
        "num_hidden_layers": 27,
    },
    "NemotronHForCausalLM": {
        "model_type": "nemotron_h",
        "n_routed_experts": 128,
        "num_experts_per_tok": 6,
    },
    "HunYuanMoEV1ForCausalLM": {"model_type": "hunyuan_v1_moe", "num_experts": 64, "moe_topk": 8},
}
# ... and those a stand-in config stands for (DeepSeek-V3's publishes moe_layer_freq too).
FAMILY_SOURCES: dict[str, tuple[Path, dict[str, Any]]] = {
    "Llama4ForConditionalGeneration": (LLAMA4_NVFP4, {}),
    "Qwen3MoeForCausalLM": (QWEN3_MOE_NVFP4, {}),
    "MixtralForCausalLM": (EXAMPLES / "mixtral-8x7b-nvfp4", {}),
    "DeepseekV3ForCausalLM": (DEEPSEEK_V3_NVFP4, {"moe_layer_freq": 1}),
    "Glm4MoeForCausalLM": (GLM45_AIR_NVFP4, {}),
}


def family_config(architecture: str, edit: dict[str, Any] | None = None) -> dict[str, Any]:
    """A config of the MoE family ``architecture`` with ``edit`` (as :func:`merged`)."""
    if architecture in FAMILY_SOURCES:
        source, fields = FAMILY_SOURCES[architecture]
        config = merged(source, fields)
    else:
        fields = json.loads(json.dumps(FAMILY_FIELDS[architecture]))  # a copy to edit
        config = {"architectures": [architecture], **fields}
    return _with(config, edit or {})
