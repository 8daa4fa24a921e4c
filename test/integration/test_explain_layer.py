"""``explain`` says what happens to the Llama 4 MoE layer, not only what the server args say:
the runner the layer builds (ModelOpt too), whether it is refused at build (naming the
switch), and, without the patches, that SGLang as it ships fails at warm-up. The same facts in
the text table and in ``--json``; no note claims the pre-scale for a refused layer."""

from __future__ import annotations

from pathlib import Path

from support.configs import LLAMA4_NVFP4, LLAMA4_NVFP4_CT, edited_copy
from support.forkserver import json_lines
from support.forkserver import run_cli as cli

CUTLASS = ("--gpu", "sm120", "--moe-runner-backend", "flashinfer_cutlass")
PRESCALE = "pre-scales the top-1 router weight"
WARM_UP = (
    "SGLang as it ships fails at warm-up on the flashinfer_cutlass MoE runner: "
    "ModelOptNvFp4FusedMoEMethod.apply rejects apply_router_weight_on_input (assert at "
    "modelopt_quant.py:"
)


def both(*args: str) -> tuple[dict, str]:
    """The one ``--json`` row and the text table of the same ``explain`` call."""
    as_json = cli("explain", "--json", *args)
    as_text = cli("explain", *args)
    assert as_json.returncode == 0 and as_text.returncode == 0, as_json.stderr[-3000:]
    (row,) = json_lines(as_json.stdout)
    return row, as_text.stdout


def test_a_top2_layer_is_shown_refused_naming_the_switch(tmp_path: Path) -> None:
    top2 = edited_copy(LLAMA4_NVFP4, tmp_path / "top2", num_experts_per_tok=2)
    row, text = both("--model", str(top2), *CUTLASS)
    assert row["moe_layer_runner"] == "flashinfer_cutlass"
    assert "top_k=2" in row["moe_layer_refused"]
    assert "--moe-runner-backend" in row["moe_layer_refused"]
    assert PRESCALE not in row["note"] and PRESCALE not in text
    assert "the MoE layer is refused when it is built: " in row["note"]
    assert "flashinfer_cutlass (layer: flashinfer_cutlass, refused)" in text
    assert f"note: {top2}: the MoE layer is refused when it is built: " in text


def test_the_modelopt_layer_shows_the_runner_its_method_picks() -> None:
    row, text = both("--model", str(LLAMA4_NVFP4), "--gpu", "sm120")
    assert row["moe_runner_backend"] == "auto"
    assert row["moe_layer_runner"] == "flashinfer_trtllm"  # create_moe_runner resolves auto
    assert row["moe_layer_refused"] is None and row["unpatched_fails_at_warmup"] is None
    assert "auto (layer: flashinfer_trtllm)" in text
    assert PRESCALE not in row["note"]


def test_without_the_patches_the_row_says_sglang_fails_at_warm_up() -> None:
    row, text = both("--no-patches", "--model", str(LLAMA4_NVFP4), *CUTLASS)
    assert row["patched"] is False and row["moe_layer_runner"] == "flashinfer_cutlass"
    assert row["unpatched_fails_at_warmup"].startswith(
        "ModelOptNvFp4FusedMoEMethod.apply rejects apply_router_weight_on_input"
    )
    assert WARM_UP in row["note"] and WARM_UP in text
    assert PRESCALE not in row["note"] and PRESCALE not in text


def test_patched_the_same_row_claims_the_prescale_and_names_the_unpatched_failure() -> None:
    row, text = both("--model", str(LLAMA4_NVFP4), *CUTLASS)
    assert row["patched"] is True and row["moe_layer_refused"] is None
    assert PRESCALE in row["note"] and PRESCALE in text
    assert "without the patches, SGLang fails at warm-up" in row["note"]


def test_the_compressed_tensors_layer_is_still_shown() -> None:
    row, text = both("--model", str(LLAMA4_NVFP4_CT), "--gpu", "sm120")
    assert row["moe_layer_runner"] == "flashinfer_cutlass"
    assert "auto (layer: flashinfer_cutlass)" in text
