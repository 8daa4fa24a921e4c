"""Every config refusal is one SGLang makes too: for each rule of ``explain``'s input checks,
SGLang's own reading (its ``ServerArgs`` resolution with ``ModelConfig``, then the model
loader's choice of model class) fails on the refused value, or its routing misreads it; a
field SGLang reads past is never refused, and SGLang is seen serving it."""

from __future__ import annotations

import importlib
import json
import traceback
from pathlib import Path
from types import SimpleNamespace
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
from sglang_nvfp4_patches.models import EXPERTS_FIELDS, TOP_K_FIELDS, first_set
from sglang_nvfp4_patches.server_args_seam.launch import Launch
from sglang_nvfp4_patches.simulation.bundled import (
    GEMMA4_NVFP4_MOE,
    LLAMA4_NVFP4,
    QWEN3_MOE_NVFP4,
)
from sglang_nvfp4_patches.simulation.gpus import GPU_PROFILES, simulated_gpu
from sglang_nvfp4_patches.simulation.moe_models import (
    MAX_EXPERTS,
    SPARSE_AT_ANY_COUNT,
    moe_field_problem,
    text_config,
)
from sglang_nvfp4_patches.simulation.server_args import quiet_sglang, resolved_server_args
from support.configs import UNREAD_FIELDS, family_config, merged

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


def _written(tmp_path: Path, source: Path | None, edit: dict[str, Any]) -> tuple[Path, dict]:
    """``source``'s config with ``edit`` (no source: ``edit`` is the config) in a directory."""
    config = merged(source, edit) if source is not None else edit
    model = tmp_path / "model"
    model.mkdir(parents=True)
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


def _routes(experts: int, top_k: int) -> bool:
    """Whether SGLang's own top-k routing sends each of 3 tokens to ``top_k`` of ``experts``
    experts (it fails, or top-0 reaches no expert)."""
    import torch
    from sglang.srt.layers.moe.topk import fused_topk_softmax_torch_raw_logits

    logits = torch.randn(3, experts)
    try:
        _, ids = fused_topk_softmax_torch_raw_logits(torch.zeros(3, 8), logits, top_k, False)
    except RuntimeError:
        return False
    return top_k > 0 and ids.shape == (3, top_k)


def _count_fields(architecture: str) -> tuple[str, str]:
    """The experts and experts-per-token fields a family's config sets (moe_settings' reading)."""
    text = text_config(family_config(architecture))
    experts, top_k = first_set(text, EXPERTS_FIELDS), first_set(text, TOP_K_FIELDS)
    assert experts is not None and top_k is not None
    return experts[0], top_k[0]


def _with_counts(architecture: str, experts: int, top_k: int | None = None) -> dict[str, Any]:
    experts_field, top_k_field = _count_fields(architecture)
    counts = {experts_field: experts} | ({} if top_k is None else {top_k_field: top_k})
    nested = "text_config" in family_config(architecture)
    return family_config(architecture, {"text_config": counts} if nested else counts)


# The MoE layers' bounds (moe_field_problem), on Llama 4 and a family of each reading:
# experts and experts per token as SGLang's own top-k routing takes them.
BOUNDED_FAMILIES = [
    "Qwen3MoeForCausalLM",  # SGLang builds MoE layers at any count
    "DeepseekV3ForCausalLM",  # ... from first_k_dense_replace on
    "NemotronHForCausalLM",  # read as moe_settings reads any family
    "HunYuanMoEV1ForCausalLM",
]


@pytest.mark.parametrize(
    ("experts", "top_k"),
    [(16, 0), (16, 17), (0, 1), (16, -1)],
)
def test_a_refused_moe_bound_is_one_sglang_routing_fails_on_or_misreads(
    experts: int, top_k: int
) -> None:
    config = _with_counts("Llama4ForConditionalGeneration", experts, top_k)
    assert moe_field_problem(config) is not None
    assert not _routes(experts, top_k)


@pytest.mark.parametrize("architecture", BOUNDED_FAMILIES)
@pytest.mark.parametrize(("experts", "top_k"), [(16, 0), (16, 17), (16, -1), (2, 3)])
def test_a_refused_top_k_of_any_family_is_one_sglang_routing_fails_on_or_misreads(
    architecture: str, experts: int, top_k: int
) -> None:
    assert moe_field_problem(_with_counts(architecture, experts, top_k)) is not None
    assert not _routes(experts, top_k)
    assert moe_field_problem(_with_counts(architecture, experts, experts)) is None
    assert _routes(experts, experts)


@pytest.mark.parametrize("architecture", ["Llama4ForConditionalGeneration", *BOUNDED_FAMILIES])
def test_the_most_experts_allowed_is_the_most_sglangs_expert_ids_name(architecture: str) -> None:
    import torch
    from sglang.srt.layers.moe.topk import fused_topk_softmax_torch_raw_logits

    _, ids = fused_topk_softmax_torch_raw_logits(torch.zeros(3, 8), torch.randn(3, 4), 2, False)
    assert ids.dtype == torch.int32 and torch.iinfo(ids.dtype).max == MAX_EXPERTS

    assert moe_field_problem(_with_counts(architecture, MAX_EXPERTS + 1)) is not None
    assert moe_field_problem(_with_counts(architecture, MAX_EXPERTS)) is None


# Per architecture whose SGLang model builds MoE layers at any expert count
# (SPARSE_AT_ANY_COUNT): the module and decoder layer whose ``stage_facts`` say, from the
# config alone, which layers are sparse.
FAMILY_DECODERS = {
    "Qwen3MoeForCausalLM": ("qwen3_moe", "Qwen3MoeDecoderLayer"),
    "Qwen3VLMoeForConditionalGeneration": ("qwen3_moe", "Qwen3MoeDecoderLayer"),
    "Qwen2MoeForCausalLM": ("qwen2_moe", "Qwen2MoeDecoderLayer"),
    "MixtralForCausalLM": ("mixtral", "MixtralDecoderLayer"),
    "MiniMaxM2ForCausalLM": ("minimax_m2", "MiniMaxM2DecoderLayer"),
    "GptOssForCausalLM": ("gpt_oss", "GptOssDecoderLayer"),
    "DeepseekV2ForCausalLM": ("deepseek_v2", "DeepseekV2DecoderLayer"),
    "DeepseekV3ForCausalLM": ("deepseek_v2", "DeepseekV2DecoderLayer"),
    "Glm4MoeForCausalLM": ("glm4_moe", "Glm4MoeDecoderLayer"),
}


def _sparse_layers(architecture: str, text: Any) -> list[int]:
    """The layers SGLang's model of ``architecture`` builds a MoE block in, for ``text``."""
    module, name = FAMILY_DECODERS[architecture]
    layer = getattr(importlib.import_module(f"sglang.srt.models.{module}"), name)
    return [i for i in range(text.num_hidden_layers) if layer.stage_facts(text, i)[1].sparse]


def test_every_family_built_at_any_count_is_asked() -> None:
    assert set(FAMILY_DECODERS) == set(SPARSE_AT_ANY_COUNT)


@pytest.mark.parametrize("architecture", FAMILY_DECODERS)
@pytest.mark.parametrize(("experts", "top_k"), [(0, None), (1, 2)])
def test_too_few_experts_are_refused_where_sglang_builds_moe_layers_of_them(
    tmp_path: Path, architecture: str, experts: int, top_k: int | None
) -> None:
    """0 experts (or top-2 of 1): SGLang's model still builds MoE layers of them, whose
    routing fails (Qwen3-MoE's block fails before: "Tensor parallel size 1 is greater than
    the number of experts 0")."""
    config = _with_counts(architecture, experts, top_k)
    assert moe_field_problem(config) is not None
    model, _ = _written(tmp_path, source=None, edit=config)
    text, _ = sglang_reads(model)
    assert getattr(text, _count_fields(architecture)[0]) == experts
    assert _sparse_layers(architecture, text)
    assert not _routes(experts, top_k or 1)


@pytest.mark.parametrize(
    "edit",
    [{"first_k_dense_replace": 61}, {"moe_layer_freq": 64}],  # of layers 0..60
)
def test_no_expert_passes_where_sglang_builds_dense_layers_only(
    tmp_path: Path, edit: dict[str, Any]
) -> None:
    config = family_config("DeepseekV3ForCausalLM", {"n_routed_experts": 0, **edit})
    assert moe_field_problem(config) is None
    model, _ = _written(tmp_path, source=None, edit=config)
    text, _ = sglang_reads(model)
    assert _sparse_layers("DeepseekV3ForCausalLM", text) == []


def test_fewer_experts_sglangs_models_read_as_dense_layers_pass(tmp_path: Path) -> None:
    """Llama 4 without interleaving at 0 experts (transformers takes a step of 0 beside its
    own list of MoE layers only), Hunyuan at 1: SGLang's own decisions."""
    from sglang.srt.models.hunyuan import _is_moe
    from sglang.srt.models.llama4 import Llama4DecoderLayer

    text = {"interleave_moe_layer_step": 0, "num_local_experts": 0, "moe_layers": []}
    llama4 = {"text_config": text}
    config = merged(LLAMA4_NVFP4, llama4)
    assert moe_field_problem(config) is None
    model, _ = _written(tmp_path / "llama4", source=None, edit=config)
    text, _ = sglang_reads(model)
    assert not Llama4DecoderLayer._is_moe_layer(SimpleNamespace(config=text), 0)
    config = family_config("HunYuanMoEV1ForCausalLM", {"num_experts": 1, "moe_topk": 8})
    assert moe_field_problem(config) is None
    model, _ = _written(tmp_path / "hunyuan", source=None, edit=config)
    text, _ = sglang_reads(model)
    assert not _is_moe(text)


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
