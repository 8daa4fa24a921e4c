"""``explain`` says what happens to the first MoE layer, not only what the server args say:
the runner the layer builds, whether it is refused at build (naming the switch), whether it
fails at the first forward, and how SGLang as it ships fails there, each from one forward of
SGLang's own layer on CPU. The same facts in the text table and in ``--json``; no note claims
the pre-scale for a refused layer. The plain launch on an RTX PRO 6000 or DGX Spark names the
first-forward failure of SGLang as it ships and the runner the patched layer builds."""

from __future__ import annotations

import re
from typing import Any

import pytest

from support.configs import GEMMA4_NVFP4_MOE, LLAMA4_NVFP4, LLAMA4_NVFP4_CT, edited_copy
from support.forkserver import json_lines, run_cli_once, server
from support.release import MOE_RUNNER_MISMATCH, ships

CUTLASS = ("--gpu", "sm120", "--moe-runner-backend", "flashinfer_cutlass")
PRESCALE = "pre-scales the top-1 router weight"
REJECTS = "at the first forward: AssertionError: apply_router_weight_on_input is not supported"
WARM_UP = f"SGLang as it ships builds the flashinfer_cutlass MoE runner and fails {REJECTS}"
MISMATCH = ("'g1_scale_c'", "Unsupported moe_runner_backend for NVFP4 MoE")


TEXT_TOO = ("top-2", "no patches", "ModelOpt default")
CASES = {
    "top-2": ("--model", "TOP2", *CUTLASS),
    "ModelOpt default": ("--model", str(LLAMA4_NVFP4), "--gpu", "sm120"),
    "Gemma 4 on sm121": ("--model", str(GEMMA4_NVFP4_MOE), "--gpu", "dgx-spark"),
    "no patches": ("--no-patches", "--model", str(LLAMA4_NVFP4), *CUTLASS),
    "patched": ("--model", str(LLAMA4_NVFP4), *CUTLASS),
    "compressed-tensors": ("--model", str(LLAMA4_NVFP4_CT), "--gpu", "sm120"),
}


@pytest.fixture(scope="module")
def explained(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every case's ``--json`` row and text table; all processes start at once."""
    top2 = edited_copy(LLAMA4_NVFP4, tmp_path_factory.mktemp("top2"), num_experts_per_tok=2)
    fork = server().zygote()
    started, shared = {}, ("ModelOpt default", "json")  # test_third_patch.py reads it too
    for name, args in CASES.items():
        args = tuple(str(top2) if arg == "TOP2" else arg for arg in args)
        for form in ("json", "text") if name in TEXT_TOO else ("json",):
            extra = ("--json",) if form == "json" else ()
            if (name, form) != shared:
                command = ["-m", "sglang_nvfp4_patches", "explain", *extra, *args]
                started[name, form] = fork.start(command, {})
    done = {shared: run_cli_once("explain", "--json", *CASES[shared[0]])}
    done.update({key: child.wait(timeout=300) for key, child in started.items()})
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
    assert "flashinfer_cutlass (refused)" in text
    assert f"note: {top2}: the MoE layer is refused when it is built: " in text


def test_a_top2_refusal_names_a_runner_shown_to_serve_it_or_says_none_is(
    explained: dict[str, Any],
) -> None:
    """The runners tried are this SGLang's own ``--moe-runner-backend`` choices; one named as
    serving serves one forward here too, and none is claimed where the search found none."""
    from sglang_nvfp4_patches.explain.layer import RUNNER_FLAG
    from sglang_nvfp4_patches.simulation.gpus import GPU_PROFILES
    from sglang_nvfp4_patches.simulation.moe_forward import LayerVerdict, run_first_moe_layer
    from sglang_nvfp4_patches.simulation.server_args import flag_choices

    row, text = explained["top-2"]
    served = re.search(
        r"; --moe-runner-backend (\w+) serves it \(one forward on CPU\)", row["note"]
    )
    if served is None:
        tried = len(flag_choices(RUNNER_FLAG)) - 1  # every choice but auto
        none = (
            f"; no --moe-runner-backend choice of this SGLang is shown to serve it ({tried} tried"
        )
        assert none in row["note"] and none in text, row["note"]
        return
    run = run_first_moe_layer(
        explained["top2"], GPU_PROFILES["sm120"], {"moe_runner_backend": served[1]}
    )
    assert run is not None and run.verdict is LayerVerdict.SERVES, run


@pytest.mark.parametrize("case", ["ModelOpt default", "Gemma 4 on sm121"])
def test_a_plain_launch_names_sglangs_first_forward_failure_and_the_patched_runner(
    explained: dict[str, Any], case: str
) -> None:
    row, text = explained[case]
    assert row["unpatched_moe_runner_backend"] == "auto"
    if not ships(MOE_RUNNER_MISMATCH):  # SGLang's own layer reaches its own CUTLASS kernel
        assert row["unpatched_fails_at_warmup"] is None and row["moe_runner_backend"] == "auto"
        return
    assert row["unpatched_moe_layer_runner"] == "flashinfer_trtllm"
    failure = row["unpatched_fails_at_warmup"]
    assert failure.startswith("at the first forward: ") and any(m in failure for m in MISMATCH)
    assert row["moe_runner_backend"] == row["moe_layer_runner"] == "flashinfer_cutlass"
    assert row["decided_by"] == "nvfp4-moe-runner"
    assert row["moe_layer_fails"] is None and row["moe_layer_refused"] is None
    expected = "without the patches, SGLang builds the flashinfer_trtllm MoE runner and fails "
    assert expected + failure in row["note"]
    if text:  # the table (Scout on SM120; the Gemma 4 row's JSON says the same)
        assert "auto (fails on flashinfer_trtllm) -> flashinfer_cutlass (serves)" in text
        assert "nvfp4-moe-runner" in text
        assert f"{expected}{failure}" in text


def test_without_the_patches_the_row_says_sglang_fails_at_the_first_forward(
    explained: dict[str, Any],
) -> None:
    row, text = explained["no patches"]
    assert row["patched"] is False and row["moe_layer_runner"] == "flashinfer_cutlass"
    assert row["unpatched_fails_at_warmup"].startswith(REJECTS)
    assert WARM_UP in row["note"] and WARM_UP in text
    assert PRESCALE not in row["note"] and PRESCALE not in text


def test_patched_the_same_row_claims_the_prescale_and_names_the_unpatched_failure(
    explained: dict[str, Any],
) -> None:
    row, _ = explained["patched"]
    assert row["patched"] is True and row["moe_layer_refused"] is None
    assert row["moe_layer_fails"] is None
    assert PRESCALE in row["note"]
    assert (
        f"without the patches, SGLang builds the flashinfer_cutlass MoE runner and fails {REJECTS}"
        in row["note"]
    )


def test_the_compressed_tensors_layer_is_still_shown(explained: dict[str, Any]) -> None:
    row, _ = explained["compressed-tensors"]
    assert row["moe_runner_backend"] == "auto"
    assert row["moe_layer_runner"] == "flashinfer_cutlass"
