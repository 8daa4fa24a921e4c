"""Gemma 4 attention default through SGLang's own resolution, GPU simulated."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

import pytest

from sglang_nvfp4_patches import server_args_gemma4_default as gemma4
from sglang_nvfp4_patches.gpu_profiles import GPU_PROFILES
from sglang_nvfp4_patches.sglang_resolution import resolve, simulated_gpu
from support.configs import (
    ALL_BUNDLED,
    GEMMA4_BF16_MOE,
    GEMMA4_NVFP4_DENSE,
    GEMMA4_NVFP4_MOE,
    REMOVE,
    edited_copy,
)

pytestmark = pytest.mark.release_matrix

GPUS = sorted(GPU_PROFILES)
SM10X = {"sm100", "sm103"}
FLAGS = [
    {},
    {"attention_backend": "trtllm_mha"},
    {"attention_backend": "triton"},
    {"prefill_attention_backend": "trtllm_mha"},
    {"decode_attention_backend": "trtllm_mha"},
    {"prefill_attention_backend": "trtllm_mha", "decode_attention_backend": "triton"},
]


PLAIN = (str, int, float, bool, type(None), list, tuple, dict)


def resolved(model_dir: Path, gpu: str, patched: bool = True, **flags: str) -> dict:
    from sglang.srt.server_args import ServerArgs

    def run() -> dict:
        with simulated_gpu(GPU_PROFILES[gpu]):
            server_args = ServerArgs(
                model_path=str(model_dir),
                skip_tokenizer_init=True,
                device="cuda",
                random_seed=0,
                **flags,
            )
            if hasattr(server_args, "resolve_once"):  # 0.5.20+; older resolve on construction
                server_args.resolve_once()
                return server_args.resolved_dict()
            return {
                name: value
                for name, value in vars(server_args).items()
                if not name.startswith("_") and isinstance(value, PLAIN)
            }

    if patched:
        return run()
    with gemma4.suspended():
        return run()


def test_patch_is_registered_by_load_plugins() -> None:
    report = gemma4.current_state()
    assert report.state.value == "applied", report


@pytest.mark.parametrize("gpu", GPUS)
@pytest.mark.parametrize("model_dir", ALL_BUNDLED, ids=lambda p: p.name)
@pytest.mark.parametrize(
    "flags", FLAGS, ids=lambda f: ",".join(f"{k}={v}" for k, v in f.items()) or "no-flags"
)
def test_bundled_configs_on_every_gpu(model_dir: Path, gpu: str, flags: dict) -> None:
    try:
        unpatched = resolved(model_dir, gpu, patched=False, **flags)
    except ValueError as rejected:  # e.g. trtllm_mha off SM100 on releases that validate it
        with pytest.raises(ValueError) as also_rejected:
            resolved(model_dir, gpu, **flags)
        assert str(also_rejected.value) == str(rejected)
        return
    patched = resolved(model_dir, gpu, **flags)
    attention_given = "attention_backend" in flags or len(flags) == 2
    if model_dir == GEMMA4_NVFP4_MOE and gpu in SM10X and not attention_given:
        # The fix: exactly as if the user had typed --attention-backend triton.
        assert unpatched["attention_backend"] == "trtllm_mha"
        assert patched["attention_backend"] == "triton"
        assert patched == resolved(
            model_dir, gpu, patched=False, attention_backend="triton", **flags
        )
    else:
        assert patched == unpatched


@pytest.mark.parametrize("gpu", sorted(SM10X))
def test_unaffected_checkpoints_keep_trtllm_mha_on_sm10x(gpu: str) -> None:
    for model_dir in (GEMMA4_BF16_MOE, GEMMA4_NVFP4_DENSE):
        assert resolved(model_dir, gpu)["attention_backend"] == "trtllm_mha"


@pytest.mark.parametrize("gpu", sorted(SM10X))
def test_nvfp4_runner_and_quantization_defaults_stay_as_sglang_sets_them(gpu: str) -> None:
    patched = resolved(GEMMA4_NVFP4_MOE, gpu)
    assert patched["moe_runner_backend"] == "flashinfer_trtllm"
    assert patched["quantization"] == "modelopt_fp4"


def test_info_line_names_model_reason_and_override(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="sglang_nvfp4_patches"):
        resolved(GEMMA4_NVFP4_MOE, "sm100")
    lines = [r for r in caplog.records if r.name.startswith("sglang_nvfp4_patches")]
    info = [r.getMessage() for r in lines if r.levelno == logging.INFO]
    assert len(info) == 1, info
    assert str(GEMMA4_NVFP4_MOE) in info[0]
    assert "triton" in info[0] and "--attention-backend trtllm_mha" in info[0]
    assert not [r for r in lines if r.levelno >= logging.WARNING]


def test_explicit_trtllm_mha_is_honoured_with_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="sglang_nvfp4_patches"):
        result = resolved(GEMMA4_NVFP4_MOE, "sm100", attention_backend="trtllm_mha")
    assert result["attention_backend"] == "trtllm_mha"
    warnings = [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("sglang_nvfp4_patches") and r.levelno == logging.WARNING
    ]
    assert len(warnings) == 1 and "accuracy" in warnings[0]


@pytest.mark.parametrize(
    ("enable_moe_block", "expected"),
    [(REMOVE, "trtllm_mha"), (False, "trtllm_mha"), (True, "triton")],
    ids=["missing", "false", "true"],
)
def test_enable_moe_block_variants_in_real_configs(
    tmp_path: Path, enable_moe_block: object, expected: str
) -> None:
    model_dir = edited_copy(GEMMA4_NVFP4_MOE, tmp_path / "cfg", enable_moe_block=enable_moe_block)
    assert resolved(model_dir, "sm100")["attention_backend"] == expected


def backend_the_patch_sets(enable_moe_block: object) -> str | None:
    """Call the installed hook of this release's layout directly with a hand-built record."""
    model_config = SimpleNamespace(
        quantization="modelopt_fp4",
        hf_config=SimpleNamespace(
            architectures=["Gemma4ForCausalLM"],
            text_config=SimpleNamespace(enable_moe_block=enable_moe_block),
        ),
    )
    record = SimpleNamespace(
        model_path="<test>",
        attention_backend=None,
        prefill_attention_backend=None,
        decode_attention_backend=None,
        _model_config=model_config,
        _model_config_built_from=None,
        _resolved_overrides=[],
        get_model_config=lambda: model_config,
    )
    layout = gemma4._layout()
    with simulated_gpu(GPU_PROFILES["sm100"]):
        if hasattr(layout, "provider"):
            return layout.provider(record, model_config.hf_config).get("attention_backend")
        gemma4.adjustments_hook(lambda server_args: None, record)
        return record.attention_backend


@pytest.mark.parametrize(
    ("enable_moe_block", "declares_triton"),
    [(None, False), (0, False), (1, True), ("true", True), ("", False)],
)
def test_patch_reads_enable_moe_block_with_bool(
    enable_moe_block: object, declares_triton: bool
) -> None:
    """None and non-bool values reach the patch only through hand-built configs (the HF
    config class normalises the file), so the installed hook is called directly here."""
    expected = "triton" if declares_triton else None
    assert backend_the_patch_sets(enable_moe_block) == expected


def test_explain_resolution_matches_direct_resolution() -> None:
    """`explain` goes through the same SGLang resolution (no copy of the rules)."""
    direct = resolved(GEMMA4_NVFP4_MOE, "sm103")
    via_explain = resolve(GEMMA4_NVFP4_MOE, GPU_PROFILES["sm103"])
    assert via_explain.attention_backend == direct["attention_backend"] == "triton"
    assert via_explain.moe_runner_backend == direct["moe_runner_backend"]
