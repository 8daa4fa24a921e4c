"""``explain``'s input checks and its reading of the plugin's reports (no SGLang import)."""

from __future__ import annotations

import codecs
import json
import traceback
from pathlib import Path

import pytest

from accuracy_support.special_files import fifo, sparse, within
from sglang_nvfp4_patches.cli import main
from sglang_nvfp4_patches.errors import EXIT_USAGE, UsageError
from sglang_nvfp4_patches.explain.input import (
    CONFIG_NAME,
    MAX_CONFIG_BYTES,
    SIDECAR_NAMES,
    architecture,
    config_problem,
    read_model_config,
)
from sglang_nvfp4_patches.explain.run import patch_outcome
from sglang_nvfp4_patches.patch_report import PatchReport, PatchState
from sglang_nvfp4_patches.simulation.bundled import GEMMA4_NVFP4_MOE, LLAMA4_NVFP4
from support.configs import UNREAD_FIELDS, family_config, merged


def _frame(path: str, line: str) -> traceback.FrameSummary:
    return traceback.FrameSummary(path, 7, "f", line=line)


SITE = "/venv/lib/python3.11/site-packages"


def test_a_missing_field_is_named_with_the_line_that_reads_it() -> None:
    frames = [
        _frame(f"{SITE}/sglang/srt/server_args.py", "model_config = ModelConfig(...)"),
        _frame(f"{SITE}/sglang/srt/configs/model_config.py", "x = self.hf_config.architectures[0]"),
    ]
    error = TypeError("'NoneType' object is not subscriptable")
    text = config_problem({Path("m/config.json"): {"model_type": "gemma4"}}, error, frames, "9.9")
    assert text == (
        'SGLang 9.9 cannot read m/config.json: field "architectures" (missing here); SGLang '
        "reads it as `x = self.hf_config.architectures[0]` "
        "(sglang/srt/configs/model_config.py:7) and fails with TypeError: 'NoneType' object "
        "is not subscriptable; fix that field (compare the checkpoint's published config.json)"
    )


@pytest.mark.parametrize(
    ("config", "line", "says"),
    [
        ({"architectures": []}, 'if config.architectures[0] == "X":', '"architectures" (an empty'),
        (
            {"quantization_config": "oops"},
            "d = self.quantization_config.to_dict()",
            '"quantization_config" (the string "oops" here)',
        ),
        (  # a key nested in text_config, read with .get
            {"text_config": {"num_experts": "many"}},
            'n = int(cfg.get("num_experts"))',
            '"text_config.num_experts" (the string "many" here)',
        ),
        ({"model_type": "x"}, "return helper(a, b)", "a field it reads"),
    ],
)
def test_the_field_comes_from_the_failing_line_and_the_file(
    config: dict, line: str, says: str
) -> None:
    frames = [_frame(f"{SITE}/transformers/configuration_utils.py", line)]
    text = config_problem({Path("c.json"): config}, ValueError("v"), frames, "9.9")
    assert says in text and "(transformers/configuration_utils.py:7)" in text


def test_a_line_of_another_library_is_named_from_its_package() -> None:
    frames = [_frame(f"{SITE}/pydantic/main.py", "return cls.validate(obj)")]
    text = config_problem({Path("c.json"): {"obj": 1}}, ValueError("v"), frames, "9.9")
    assert "(pydantic/main.py:7)" in text and SITE not in text


def test_the_innermost_line_naming_a_field_wins() -> None:
    frames = [
        _frame(f"{SITE}/sglang/a.py", "q = hf_config.quantization_config"),
        _frame(f"{SITE}/sglang/b.py", "return inner(x)"),  # names nothing: skipped
    ]
    text = config_problem({Path("c.json"): {}}, KeyError("k"), frames, "9.9")
    assert '"quantization_config" (missing here)' in text and "(sglang/a.py:7)" in text


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"architectures": ["Gemma4ForConditionalGeneration"]}, "Gemma4ForConditionalGeneration"),
        ({"architectures": []}, None),
        ({"architectures": None}, None),
        ({"architectures": [3]}, None),
        ({}, None),
    ],
)
def test_architecture(config: dict, expected: str | None) -> None:
    assert architecture(config) == expected


def _reports(*states: PatchState, reason: str = "why") -> dict[str, PatchReport]:
    names = ("gemma4-attention", "llama4-router-weight")
    return {n: PatchReport(n, s, reason) for n, s in zip(names, states, strict=True)}


def test_an_invalid_setting_means_no_patch_and_an_error() -> None:
    live, lines = patch_outcome(_reports(PatchState.FAILED, PatchState.FAILED, reason="invalid X"))
    assert live is False
    assert lines == [
        "error: no patch is applied (gemma4-attention failed: invalid X; "
        "llama4-router-weight failed: invalid X); showing SGLang's own answer"
    ]


def test_one_applied_patch_is_live_and_a_failed_one_is_still_an_error() -> None:
    live, lines = patch_outcome(_reports(PatchState.APPLIED, PatchState.FAILED))
    assert live is True
    assert lines == ["error: llama4-router-weight failed: why"]


def test_applied_and_disabled_is_live_and_quiet() -> None:
    assert patch_outcome(_reports(PatchState.APPLIED, PatchState.DISABLED)) == (True, [])


@pytest.mark.parametrize(
    "states",
    [
        (PatchState.DISABLED, PatchState.DISABLED),
        (PatchState.NOT_APPLICABLE, PatchState.NOT_APPLICABLE),
        (PatchState.ALREADY_UPSTREAM, PatchState.NOT_APPLICABLE),
    ],
)
def test_nothing_applied_is_said_as_a_note(states: tuple[PatchState, PatchState]) -> None:
    live, lines = patch_outcome(_reports(*states))
    assert live is False
    assert len(lines) == 1 and lines[0].startswith("note: no patch is applied (gemma4-attention")


def test_a_plugin_sglang_did_not_load_is_said(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SGLANG_PLUGINS", "other_plugin")
    live, lines = patch_outcome({})
    assert live is False
    assert lines == [
        "note: no patch is applied (SGLang did not load the plugin: SGLANG_PLUGINS="
        "'other_plugin' does not name nvfp4_patches (add it there)); showing SGLang's own answer"
    ]


def _plant(path: Path, case: str) -> None:
    """``path`` made into one kind of file SGLang could not read."""
    text = '{"model_type": "llama4"}'
    planted = {
        "dev-zero": lambda: path.symlink_to("/dev/zero"),
        "fifo": lambda: fifo(path),
        "directory": lambda: path.mkdir(),
        "huge": lambda: sparse(path, MAX_CONFIG_BYTES + 2**20),
        "malformed": lambda: path.write_text('{"model_type": '),
        "list": lambda: path.write_text("[1, 2]"),
        "string": lambda: path.write_text('"config"'),
        "utf-8 bom": lambda: path.write_bytes(codecs.BOM_UTF8 + text.encode()),
        "utf-16": lambda: path.write_bytes(text.encode("utf-16")),
        "utf-16 without bom": lambda: path.write_bytes(text.encode("utf-16-le")),
        "utf-32": lambda: path.write_bytes(text.encode("utf-32")),
        "latin-1": lambda: path.write_bytes('{"model_type": "llama4", "x": "é"}'.encode("latin-1")),
    }
    planted[case]()


KINDS = {
    "dev-zero": "is a character device, not a regular file",
    "fifo": "is a FIFO (named pipe), not a regular file",
    "directory": "is a directory, not a regular file",
    "huge": f"is 17 MiB, more than the {MAX_CONFIG_BYTES // 2**20} MiB",
    "malformed": "is not valid JSON (Expecting value: line 1 column 16 (char 15))",
    "list": "holds a JSON array, not an object",
    "string": "holds a JSON string, not an object",
    "utf-8 bom": "is encoded as UTF-8 with a byte-order mark; ",
    "utf-16": "is encoded as UTF-16; ",
    "utf-16 without bom": "is encoded as UTF-16-LE; ",
    "utf-32": "is encoded as UTF-32; ",
    "latin-1": "is not UTF-8 (byte 0xe9 at offset 31)",
}


@pytest.mark.parametrize("case", KINDS)
@pytest.mark.parametrize("name", [CONFIG_NAME, *SIDECAR_NAMES])
def test_every_file_sglang_reads_beside_the_config_is_checked_first_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, case: str
) -> None:
    """config.json and each file SGLang opens beside it (hf_quant_config.json, ...) are read
    as run files are: opened without blocking, a regular file only (a link to /dev/zero read
    to the end would eat the machine, a FIFO would hang), size-capped, then UTF-8 without a
    byte-order mark and one JSON object, as SGLang reads them; each problem is one line naming
    that file, exit 2, before SGLang is imported."""
    model = tmp_path / "model"
    model.mkdir()
    if name != CONFIG_NAME:
        (model / CONFIG_NAME).write_text('{"model_type": "llama4"}')
    path = model / name
    _plant(path, case)
    assert within(10, lambda: main(["explain", "--model", str(model)])) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}: {KINDS[case]}"), err
    assert len(err.splitlines()) == 1
    if name != CONFIG_NAME and case not in ("huge",):  # what to do about a file beside it
        assert f"beside {CONFIG_NAME}" in err or "save it as" in err, err


def _edited(tmp_path: Path, source: Path, edits: dict) -> Path:
    config = json.loads((source / CONFIG_NAME).read_text())
    config["text_config"].update(edits)
    model = tmp_path / "model"
    model.mkdir()
    (model / CONFIG_NAME).write_text(json.dumps(config))
    return model


# Llama 4 Scout: 16 experts; Gemma 4 26B-A4B: 128.
MOE_FIELD_CASES = [
    (LLAMA4_NVFP4, "num_experts_per_tok", 0, "is 0: each token goes to at least 1 expert"),
    (LLAMA4_NVFP4, "num_experts_per_tok", -1, "is -1: each token goes to at least 1 expert"),
    (LLAMA4_NVFP4, "num_experts_per_tok", 10**12, 'than the 16 experts "text_config.num_local'),
    (LLAMA4_NVFP4, "num_experts_per_tok", 17, "is 17, more than the 16 experts"),
    (
        LLAMA4_NVFP4,
        "num_experts_per_tok",
        "2",
        'is the string "2"; SGLang reads it as a whole number',
    ),
    (
        LLAMA4_NVFP4,
        "num_experts_per_tok",
        True,
        "is the boolean true; SGLang reads it as a whole number",
    ),
    (
        LLAMA4_NVFP4,
        "num_experts_per_tok",
        1.5,
        "is the number 1.5; SGLang reads it as a whole number",
    ),
    (LLAMA4_NVFP4, "num_local_experts", 0, "is 0: a Llama 4 MoE layer has from 1 to 2147483647"),
    (LLAMA4_NVFP4, "num_local_experts", -16, "is -16: a Llama 4 MoE layer has from 1 to"),
    (LLAMA4_NVFP4, "num_local_experts", 10**12, "is 1000000000000: a Llama 4 MoE layer"),
    (LLAMA4_NVFP4, "num_local_experts", 2**31, "routes by int32 expert ids)"),
    (GEMMA4_NVFP4_MOE, "top_k_experts", 0, "is 0: each token goes to at least 1 expert"),
    (GEMMA4_NVFP4_MOE, "top_k_experts", 129, "is 129, more than the 128 experts"),
    (GEMMA4_NVFP4_MOE, "num_experts", 0, "is 0: a Gemma 4 MoE layer has from 1 to 2147483647"),
    (GEMMA4_NVFP4_MOE, "num_experts", [8], "is an array [8]; SGLang reads it as a whole number"),
]


@pytest.mark.parametrize(
    ("source", "edits"),
    [
        (LLAMA4_NVFP4, {"num_experts_per_tok": 16}),  # every expert: allowed
        (LLAMA4_NVFP4, {"num_local_experts": 2**31 - 1}),  # the most SGLang's int32 ids name
        (LLAMA4_NVFP4, {"num_experts_per_tok": 2}),  # refused by the plugin, not here
        (LLAMA4_NVFP4, {"num_local_experts": None, "num_experts_per_tok": None}),  # defaults
        (GEMMA4_NVFP4_MOE, {"top_k_experts": 128}),
        (GEMMA4_NVFP4_MOE, {"enable_moe_block": False, "top_k_experts": 0}),  # dense: unread
        # without interleaving, SGLang's Llama 4 layers are dense at 0 experts
        (LLAMA4_NVFP4, {"interleave_moe_layer_step": 0, "num_local_experts": 0, "moe_layers": []}),
    ],
)
def test_moe_fields_a_layer_can_be_built_from_pass(
    tmp_path: Path, source: Path, edits: dict
) -> None:
    model = _edited(tmp_path, source, edits)
    assert read_model_config(model)["text_config"]["model_type"]


# Every other MoE family, its fields read as SGLang's model reads them. Qwen3-MoE (the
# stand-in): 128 experts, top-8; DeepSeek-V3: 256, top-8; GLM-4.5-Air: 128; Mixtral: 8;
# MiniMax-M2: 256; GPT-OSS: 32, top-4; Qwen3-VL-MoE: 128 in text_config; Nemotron-H: 128;
# Hunyuan: 64 ("moe_topk").
FAMILY_CASES = [
    ("Qwen3MoeForCausalLM", {"num_experts": 10**30}, "num_experts", f"is {10**30}: a Qwen3Moe"),
    ("Qwen3MoeForCausalLM", {"num_experts_per_tok": -1}, "num_experts_per_tok", "at least 1"),
    ("Qwen3MoeForCausalLM", {"num_experts_per_tok": 200}, "num_experts_per_tok", "the 128 experts"),
    ("Qwen3MoeForCausalLM", {"num_experts": 0}, "num_experts", "is 0: a Qwen3MoeForCausalLM MoE"),
    (
        "Qwen3MoeForCausalLM",
        {"num_experts": 1},
        "num_experts_per_tok",
        'the 1 expert "num_experts"',
    ),
    ("DeepseekV3ForCausalLM", {"n_routed_experts": 0}, "n_routed_experts", "has from 1 to"),
    ("DeepseekV3ForCausalLM", {"num_experts_per_tok": 257}, "num_experts_per_tok", "the 256 exp"),
    ("Glm4MoeForCausalLM", {"n_routed_experts": -1}, "n_routed_experts", "is -1: a Glm4Moe"),
    ("MixtralForCausalLM", {"num_local_experts": 2**31}, "num_local_experts", "int32 expert ids"),
    ("MiniMaxM2ForCausalLM", {"num_local_experts": 0}, "num_local_experts", "has from 1 to"),
    ("GptOssForCausalLM", {"num_experts_per_tok": 0}, "num_experts_per_tok", "at least 1 expert"),
    (
        "Qwen3VLMoeForConditionalGeneration",
        {"text_config": {"num_experts": 0}},
        "text_config.num_experts",
        "is 0: a Qwen3VLMoeForConditionalGeneration MoE layer has from 1",
    ),
    ("NemotronHForCausalLM", {"num_experts_per_tok": 129}, "num_experts_per_tok", "the 128 exp"),
    ("HunYuanMoEV1ForCausalLM", {"moe_topk": 65}, "moe_topk", 'the 64 experts "num_experts"'),
]


def _written(tmp_path: Path, config: dict) -> Path:
    model = tmp_path / "model"
    model.mkdir()
    (model / CONFIG_NAME).write_text(json.dumps(config))
    return model


MOE_CASES = [
    (merged(source, {"text_config": {field: value}}), f"text_config.{field}", says)
    for source, field, value, says in MOE_FIELD_CASES
] + [(family_config(name, edit), field, says) for name, edit, field, says in FAMILY_CASES]


@pytest.mark.parametrize(("config", "field", "says"), MOE_CASES)
def test_a_moe_field_the_layer_cannot_be_built_from_is_one_line_naming_it_by_its_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], config: dict, field: str, says: str
) -> None:
    """Experts per token and experts per layer, as the family's MoE layer reads them: a
    whole number, at least 1, top-k at most the experts (else explain would build, and
    report on, a layer no checkpoint has). Once Qwen3-MoE's 10**30 experts, top-k -1 and
    top-k 200 of 128 experts all served, and its 0 experts read as no MoE layer (SGLang
    fails on each)."""
    model = _written(tmp_path, config)
    assert main(["explain", "--model", str(model)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith(f'error: {model / CONFIG_NAME}: field "{field}" is '), err
    assert says in err and len(err.splitlines()) == 1, err


@pytest.mark.parametrize(
    ("architecture", "edit"),
    [
        ("Qwen3MoeForCausalLM", {"num_experts": 1, "num_experts_per_tok": 1}),  # one expert
        ("Qwen3MoeForCausalLM", {"num_experts_per_tok": 128}),  # every expert
        ("Qwen3MoeForCausalLM", {"num_experts": "8"}),  # its type: SGLang's to judge
        ("DeepseekV3ForCausalLM", {"n_routed_experts": 0, "first_k_dense_replace": 61}),  # dense
        ("DeepseekV3ForCausalLM", {"n_routed_experts": 0, "moe_layer_freq": 64}),  # 0..60 dense
        ("DeepseekV3ForCausalLM", {"n_routed_experts": None, "num_experts_per_tok": 300}),
        ("NemotronHForCausalLM", {"n_routed_experts": 1, "num_experts_per_tok": 6}),
        ("HunYuanMoEV1ForCausalLM", {"num_experts": 1, "moe_topk": 8}),  # dense below 2
    ],
)
def test_moe_fields_of_dense_layers_or_a_buildable_layer_pass(
    tmp_path: Path, architecture: str, edit: dict
) -> None:
    """A family that may read fewer than 2 experts as dense layers (or whose dense-layer fields
    make every layer dense) is not refused there: explain reads no MoE layer and says so."""
    config = family_config(architecture, edit)
    assert read_model_config(_written(tmp_path, config)) == config


def test_the_top_level_fields_are_not_read_when_text_config_is_null(tmp_path: Path) -> None:
    """A null text_config is the model's defaults to transformers (SGLang 0.5.23 reads Llama 4
    top-1 here): the top level's text fields are not read, so never refused."""
    model = tmp_path / "model"
    model.mkdir()
    config = {
        "model_type": "llama4",
        "architectures": ["Llama4ForConditionalGeneration"],
        "text_config": None,
        "num_experts_per_tok": 0,
        "hidden_size": None,
    }
    (model / CONFIG_NAME).write_text(json.dumps(config))
    assert read_model_config(model)["text_config"] is None


def test_the_top_level_fields_are_read_where_there_is_no_text_config(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    config = {"model_type": "qwen3_moe", "num_experts": 8, "hidden_size": "2048"}
    (model / CONFIG_NAME).write_text(json.dumps(config))
    with pytest.raises(UsageError, match='field "hidden_size" is the string'):
        read_model_config(model)


def test_a_field_of_a_file_beside_the_config_names_that_file() -> None:
    """hf_quant_config.json's "quantization" read by SGLang: the error names that file."""
    files = {
        Path("m/config.json"): {"model_type": "llama4", "architectures": ["X"]},
        Path("m/hf_quant_config.json"): {"quantization": 7},
    }
    frames = [_frame(f"{SITE}/sglang/srt/configs/model_config.py", 'q = cfg.get("quantization")')]
    text = config_problem(files, AttributeError("no"), frames, "9.9")
    assert text.startswith(
        'SGLang 9.9 cannot read m/hf_quant_config.json: field "quantization" (the number 7 here)'
    )
    assert text.endswith("(compare the checkpoint's published hf_quant_config.json)")


QUANT_FRAMES = [
    _frame(f"{SITE}/sglang/srt/layers/quantization/modelopt_quant.py", "raise ValueError("),
]


@pytest.mark.parametrize(
    ("quantization", "field", "expected"),
    [
        ({"quant_method": "modelopt", "quant_algo": "nvfp4"}, "quant_algo", "NVFP4"),
        ({"quant_algo": "nvfp4"}, "quant_algo", "NVFP4"),  # no method: ModelOpt's
        ({"quant_method": "ModelOpt", "quant_algo": "NVFP4"}, "quant_method", "modelopt"),
        ({"quant_method": "MODELOPT", "quant_algo": "nvfp4"}, "quant_method", "modelopt"),
    ],
)
def test_a_modelopt_name_spelled_otherwise_is_named_where_sglangs_quantization_fails(
    quantization: dict, field: str, expected: str
) -> None:
    """SGLang matches ModelOpt's names exactly; its failure names neither field."""
    files = {Path("m/config.json"): {"quantization_config": quantization}}
    error = ValueError("ModelOptFp8Config only supports regular FP8 quantization")
    text = config_problem(files, error, QUANT_FRAMES, "9.9")
    value = json.dumps(quantization[field])
    assert text.startswith(
        f'SGLang 9.9 cannot read m/config.json: field "quantization_config.{field}" is the '
        f'string {value}; SGLang matches ModelOpt\'s names exactly (here "{expected}")'
    ), text
    assert text.endswith(f'; set it to "{expected}"')


def test_a_modelopt_name_is_blamed_only_where_sglangs_quantization_code_fails() -> None:
    files = {Path("c.json"): {"quantization_config": {"quant_algo": "nvfp4"}}}
    frames = [
        _frame(f"{SITE}/sglang/srt/configs/model_config.py", "x = self.hf_config.hidden_size")
    ]
    text = config_problem(files, ValueError("v"), frames, "9.9")
    assert "quant_algo" not in text and 'field "hidden_size" (missing here)' in text


def test_a_nested_field_is_named_by_its_path() -> None:
    files = {Path("c.json"): {"text_config": {"num_experts": None}, "vision_config": {}}}
    frames = [_frame(f"{SITE}/sglang/srt/models/qwen3_moe.py", "if tp > config.num_experts:")]
    text = config_problem(files, TypeError("t"), frames, "9.9")
    assert 'field "text_config.num_experts" (null here)' in text


def _scout_with(tmp_path: Path, edit: dict) -> tuple[Path, dict]:
    """The Llama 4 Scout stand-in with ``edit`` (:func:`support.configs.merged`)."""
    config = merged(LLAMA4_NVFP4, edit)
    model = tmp_path / "model"
    model.mkdir()
    (model / CONFIG_NAME).write_text(json.dumps(config))
    return model, config


@pytest.mark.parametrize(
    ("edit", "field", "holds"),
    [
        ({"architectures": "Llama4ForConditionalGeneration"}, "architectures", "the string"),
        ({"architectures": []}, "architectures", "an empty array"),
        ({"architectures": [None]}, "architectures", "an array [null]"),
        (
            {"quantization_config": {"quant_method": None}},
            "quantization_config.quant_method",
            "null",
        ),
        (
            {"quantization_config": {"quant_method": 4}},
            "quantization_config.quant_method",
            "number 4",
        ),
        ({"quantization_config": ["modelopt"]}, "quantization_config", 'an array ["modelopt"]'),
        ({"text_config": "llama4_text"}, "text_config", "the string"),
        ({"text_config": {"hidden_size": None}}, "text_config.hidden_size", "null"),
        ({"text_config": {"hidden_size": True}}, "text_config.hidden_size", "the boolean true"),
        (
            {"text_config": {"num_experts_per_tok": "8"}},
            "text_config.num_experts_per_tok",
            'the string "8"',
        ),
        (
            {"text_config": {"num_local_experts": 1.5}},
            "text_config.num_local_experts",
            "number 1.5",
        ),
        ({"text_config": {"num_hidden_layers": None}}, "text_config.num_hidden_layers", "null"),
        (
            {"text_config": {"quantization_config": "modelopt"}},
            "text_config.quantization_config",
            "the string",
        ),
    ],
)
def test_a_field_of_the_wrong_type_or_null_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: dict, field: str, holds: str
) -> None:
    """Once a null quant_method got a message blaming "architectures", and a string
    "architectures" made explain exit 0 saying nothing about the model."""
    model, _ = _scout_with(tmp_path, edit)
    assert main(["explain", "--model", str(model)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith(f'error: {model / CONFIG_NAME}: field "{field}" is '), err
    assert holds in err and len(err.splitlines()) == 1, err


@pytest.mark.parametrize(("source", "edit"), UNREAD_FIELDS)
def test_a_field_sglang_reads_past_is_never_refused(
    tmp_path: Path, source: Path, edit: dict
) -> None:
    config = merged(source, edit)
    (tmp_path / CONFIG_NAME).write_text(json.dumps(config))
    assert read_model_config(tmp_path) == config
