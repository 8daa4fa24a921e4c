"""Every config refusal is one SGLang makes too: for each rule of ``explain``'s input checks,
SGLang's own reading (its ``ServerArgs`` resolution with ``ModelConfig``, then the model
loader's choice of model class) fails on the refused value, or its routing misreads it; a
field SGLang reads past is never refused, and SGLang is seen serving it."""

from __future__ import annotations

import json
import traceback
from pathlib import Path
from typing import Any

import pytest

from sglang_nvfp4_patches.errors import UsageError
from sglang_nvfp4_patches.explain.input import (
    FIELD_RULES,
    MOE_COUNT_RULES,
    TEXT,
    field_type_problem,
    read_checkpoint,
)
from sglang_nvfp4_patches.server_args_seam.launch import Launch
from sglang_nvfp4_patches.simulation.bundled import (
    GEMMA4_NVFP4_MOE,
    LLAMA4_NVFP4,
    QWEN3_MOE_NVFP4,
)
from sglang_nvfp4_patches.simulation.gpus import GPU_PROFILES, simulated_gpu
from sglang_nvfp4_patches.simulation.moe_models import MAX_EXPERTS, moe_field_problem
from sglang_nvfp4_patches.simulation.server_args import quiet_sglang, resolved_server_args
from support.configs import UNREAD_FIELDS, merged

# Per rule, edits SGLang fails on: on the Llama 4 stand-in (text fields nested in
# text_config) and, for the text model's fields, on the flat Qwen3-MoE one.
REFUSED: dict[str, list[tuple[Path, dict[str, Any]]]] = {
    "architectures": [
        (LLAMA4_NVFP4, {"architectures": value})
        for value in (None, [], [None], [""], "Llama4ForConditionalGeneration")
    ],
    "text_config": [(LLAMA4_NVFP4, {"text_config": "llama4_text"})],
    "quantization_config": [(LLAMA4_NVFP4, {"quantization_config": ["modelopt"]})],
    "text_config.quantization_config": [
        (LLAMA4_NVFP4, {"text_config": {"quantization_config": "modelopt"}})
    ],
    "quantization_config.quant_method": [
        (LLAMA4_NVFP4, {"quantization_config": {"quant_method": value}}) for value in (None, 4, "")
    ],
    f"{TEXT}hidden_size": [
        (LLAMA4_NVFP4, {"text_config": {"hidden_size": None}}),
        (QWEN3_MOE_NVFP4, {"hidden_size": True}),
        (QWEN3_MOE_NVFP4, {"hidden_size": 1.5}),
    ],
    f"{TEXT}num_hidden_layers": [(QWEN3_MOE_NVFP4, {"num_hidden_layers": None})],
}
# Per family, the MoE counts its config class types.
REFUSED_COUNTS: dict[str, list[tuple[Path, dict[str, Any]]]] = {
    f"{TEXT}num_experts_per_tok": [
        (LLAMA4_NVFP4, {"text_config": {"num_experts_per_tok": value}}) for value in ("2", True)
    ],
    f"{TEXT}num_local_experts": [(LLAMA4_NVFP4, {"text_config": {"num_local_experts": [8]}})],
    f"{TEXT}top_k_experts": [(GEMMA4_NVFP4_MOE, {"text_config": {"top_k_experts": "8"}})],
    f"{TEXT}num_experts": [(GEMMA4_NVFP4_MOE, {"text_config": {"num_experts": 1.5}})],
}
CASES = [
    (rule, source, edit)
    for rules in (REFUSED, REFUSED_COUNTS)
    for rule, cases in rules.items()
    for source, edit in cases
]


def _written(tmp_path: Path, source: Path, edit: dict[str, Any]) -> tuple[Path, dict]:
    config = merged(source, edit)
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(config))
    return model, config


def sglang_reads(model_dir: Path) -> tuple[Any, str]:
    """What SGLang reads off ``model_dir`` on a simulated SM100 (``ModelConfig``'s text config
    and the model class its loader picks); raises what SGLang raised."""
    from sglang.srt.model_loader.utils import get_model_architecture

    with quiet_sglang(), simulated_gpu(GPU_PROFILES["sm100"]):
        model_config = Launch.resolved(resolved_server_args(model_dir)).model_config
    _, architecture = get_model_architecture(model_config)
    return model_config.hf_text_config, architecture


def test_every_rule_has_a_case_sglang_fails_on() -> None:
    assert set(REFUSED) == set(FIELD_RULES)
    assert set(REFUSED_COUNTS) == {rule for rules in MOE_COUNT_RULES.values() for rule in rules}


@pytest.mark.parametrize(("rule", "source", "edit"), CASES, ids=[f"{r}={e}" for r, _, e in CASES])
def test_a_refused_field_is_one_sglang_fails_on(
    tmp_path: Path, rule: str, source: Path, edit: dict[str, Any]
) -> None:
    model, config = _written(tmp_path, source, edit)
    field = rule.replace(TEXT, "text_config." if "text_config" in config else "")
    assert (field_type_problem(config) or "").startswith(f'field "{field}" is ')
    with pytest.raises(Exception) as raised:
        sglang_reads(model)
    frames = traceback.extract_tb(raised.value.__traceback__)
    assert "sglang_nvfp4_patches" not in frames[-1].filename  # SGLang's (transformers') own


@pytest.mark.parametrize(("source", "edit"), UNREAD_FIELDS, ids=[str(e) for _, e in UNREAD_FIELDS])
def test_a_field_never_refused_is_one_sglang_reads_past(
    tmp_path: Path, source: Path, edit: dict[str, Any]
) -> None:
    model, config = _written(tmp_path, source, edit)
    assert field_type_problem(config) is None and moe_field_problem(config) is None
    _, architecture = sglang_reads(model)
    assert architecture == config["architectures"][0]


# The Llama 4 and Gemma 4 MoE layers' bounds (moe_field_problem): experts and experts per
# token as SGLang's own top-k routing takes them, next to what the rule says of them.
@pytest.mark.parametrize(
    ("experts", "top_k"),
    [(16, 0), (16, 17), (0, 1), (16, -1)],
)
def test_a_refused_moe_bound_is_one_sglang_routing_fails_on_or_misreads(
    experts: int, top_k: int
) -> None:
    import torch
    from sglang.srt.layers.moe.topk import fused_topk_softmax_torch_raw_logits

    text = {"num_local_experts": experts, "num_experts_per_tok": top_k}
    config = merged(LLAMA4_NVFP4, {"text_config": text})
    assert moe_field_problem(config) is not None
    hidden = torch.zeros(3, 8)
    try:
        _, ids = fused_topk_softmax_torch_raw_logits(hidden, torch.randn(3, experts), top_k, False)
    except RuntimeError:
        return  # SGLang's routing fails on it
    assert ids.shape == (3, 0)  # top-0: no token reaches any expert


def test_the_most_experts_allowed_is_the_most_sglangs_expert_ids_name() -> None:
    import torch
    from sglang.srt.layers.moe.topk import fused_topk_softmax_torch_raw_logits

    _, ids = fused_topk_softmax_torch_raw_logits(torch.zeros(3, 8), torch.randn(3, 4), 2, False)
    assert ids.dtype == torch.int32 and torch.iinfo(ids.dtype).max == MAX_EXPERTS
    over = {"text_config": {"num_local_experts": MAX_EXPERTS + 1}}
    assert moe_field_problem(merged(LLAMA4_NVFP4, over)) is not None
    at = {"text_config": {"num_local_experts": MAX_EXPERTS}}
    assert moe_field_problem(merged(LLAMA4_NVFP4, at)) is None


@pytest.mark.parametrize("model_type", [None, "", 5, "absent"])
def test_a_refused_model_type_is_one_sglang_fails_on(tmp_path: Path, model_type: object) -> None:
    """read_checkpoint's own rule: a "model_type" string (transformers picks the config class
    by it)."""
    config = merged(QWEN3_MOE_NVFP4, {"model_type": model_type})
    if model_type == "absent":
        del config["model_type"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(UsageError, match='has no "model_type" string'):
        read_checkpoint(tmp_path)
    with pytest.raises(ValueError, match=r"model type|model_type"):
        sglang_reads(tmp_path)
