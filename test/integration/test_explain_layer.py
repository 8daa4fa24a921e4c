"""``explain`` says what happens to the Llama 4 MoE layer, not only what the server args say:
the runner the layer builds (ModelOpt too), whether it is refused at build (naming the
switch), and, without the patches, that SGLang as it ships fails at warm-up. The same facts in
the text table and in ``--json``; no note claims the pre-scale for a refused layer."""

from __future__ import annotations

from typing import Any

import pytest

from support.configs import LLAMA4_NVFP4, LLAMA4_NVFP4_CT, edited_copy
from support.forkserver import json_lines, server

CUTLASS = ("--gpu", "sm120", "--moe-runner-backend", "flashinfer_cutlass")
PRESCALE = "pre-scales the top-1 router weight"
WARM_UP = (
    "SGLang as it ships fails at warm-up on the flashinfer_cutlass MoE runner: "
    "ModelOptNvFp4FusedMoEMethod.apply rejects apply_router_weight_on_input (assert at "
    "modelopt_quant.py:"
)


TEXT_TOO = ("top-2", "no patches", "ModelOpt default")  # the three cases, as tables
CASES = {
    "top-2": ("--model", "TOP2", *CUTLASS),
    "ModelOpt default": ("--model", str(LLAMA4_NVFP4), "--gpu", "sm120"),
    "no patches": ("--no-patches", "--model", str(LLAMA4_NVFP4), *CUTLASS),
    "patched": ("--model", str(LLAMA4_NVFP4), *CUTLASS),
    "compressed-tensors": ("--model", str(LLAMA4_NVFP4_CT), "--gpu", "sm120"),
}


@pytest.fixture(scope="module")
def explained(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every case's ``--json`` row and text table; all processes start at once."""
    top2 = edited_copy(LLAMA4_NVFP4, tmp_path_factory.mktemp("top2"), num_experts_per_tok=2)
    fork = server()
    started = {}
    for name, args in CASES.items():
        args = tuple(str(top2) if arg == "TOP2" else arg for arg in args)
        for form in ("json", "text") if name in TEXT_TOO else ("json",):
            extra = ("--json",) if form == "json" else ()
            command = ["-m", "sglang_nvfp4_patches", "explain", *extra, *args]
            started[name, form] = fork.start(command, {})
    done = {key: child.wait(timeout=300) for key, child in started.items()}
    for key, result in done.items():
        assert result.returncode == 0, (key, result.stderr[-3000:])
    return {
        "top2": top2,
        **{
            name: (
                json_lines(done[name, "json"].stdout)[0],
                done[name, "text"].stdout if name in TEXT_TOO else "",
            )
            for name in CASES
        },
    }


def test_a_top2_layer_is_shown_refused_naming_the_switch(explained: dict[str, Any]) -> None:
    top2 = explained["top2"]
    row, text = explained["top-2"]
    assert row["moe_layer_runner"] == "flashinfer_cutlass"
    assert "top_k=2" in row["moe_layer_refused"]
    assert "--moe-runner-backend" in row["moe_layer_refused"]
    assert PRESCALE not in row["note"] and PRESCALE not in text
    assert "the MoE layer is refused when it is built: " in row["note"]
    assert "flashinfer_cutlass (layer: flashinfer_cutlass, refused)" in text
    assert f"note: {top2}: the MoE layer is refused when it is built: " in text


def test_the_modelopt_layer_shows_the_runner_its_method_picks(explained: dict[str, Any]) -> None:
    row, text = explained["ModelOpt default"]
    assert row["moe_runner_backend"] == "auto"
    assert row["moe_layer_runner"] == "flashinfer_trtllm"  # create_moe_runner resolves auto
    assert row["moe_layer_refused"] is None and row["unpatched_fails_at_warmup"] is None
    assert "auto (layer: flashinfer_trtllm)" in text
    assert PRESCALE not in row["note"]


def test_without_the_patches_the_row_says_sglang_fails_at_warm_up(
    explained: dict[str, Any],
) -> None:
    row, text = explained["no patches"]
    assert row["patched"] is False and row["moe_layer_runner"] == "flashinfer_cutlass"
    assert row["unpatched_fails_at_warmup"].startswith(
        "ModelOptNvFp4FusedMoEMethod.apply rejects apply_router_weight_on_input"
    )
    assert WARM_UP in row["note"] and WARM_UP in text
    assert PRESCALE not in row["note"] and PRESCALE not in text


def test_patched_the_same_row_claims_the_prescale_and_names_the_unpatched_failure(
    explained: dict[str, Any],
) -> None:
    row, _ = explained["patched"]
    assert row["patched"] is True and row["moe_layer_refused"] is None
    assert PRESCALE in row["note"]
    assert "without the patches, SGLang fails at warm-up" in row["note"]


def test_the_compressed_tensors_layer_is_still_shown(explained: dict[str, Any]) -> None:
    row, _ = explained["compressed-tensors"]
    assert row["moe_runner_backend"] == "auto"
    assert row["moe_layer_runner"] == "flashinfer_cutlass"
