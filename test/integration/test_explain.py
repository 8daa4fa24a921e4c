"""`explain` as a user runs it: fresh processes, real SGLang, simulated GPU."""

from __future__ import annotations

import json

import pytest

from sglang_nvfp4_patches.simulation.bundled import BUNDLED_MODELS
from support.configs import GEMMA4_NVFP4_MOE, LLAMA4_NVFP4_CT
from support.forkserver import json_lines, run_cli_once
from support.forkserver import run_cli as cli
from support.release import KV_SCALES_APPLIED, recorded_llama4_state, ships

NVFP4_MOE = "nvidia/Gemma-4-26B-A4B-NVFP4"


@pytest.fixture(scope="module")
def explain_all() -> list[dict]:
    done = cli("explain", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    return json_lines(done.stdout)


def test_explain_covers_every_bundled_model_on_every_gpu(explain_all: list[dict]) -> None:
    gpus = ("sm90", "sm100", "sm103", "sm120", "sm121")
    assert len(explain_all) == len(BUNDLED_MODELS) * len(gpus)
    assert {(r["model"], r["gpu"]) for r in explain_all} == {
        (m, g) for m in BUNDLED_MODELS.values() for g in gpus
    }
    for row in explain_all:
        assert {"model", "gpu", "attention_backend", "moe_runner_backend", "decided_by"} <= set(row)


def test_explain_shows_sglangs_default_where_the_root_cause_is_fixed(
    explain_all: list[dict],
) -> None:
    """The primary SGLang (0.5.23) carries sglang#28144: no row's attention is changed by the
    rule (nvfp4-moe-runner decides the MoE runner of the ModelOpt NVFP4 MoE rows it covers)."""
    for row in explain_all:
        assert row["decided_by"] in ("sglang", "nvfp4-moe-runner"), row
        assert row["attention_backend"] == row["unpatched_attention_backend"]
        if row["gpu"] in ("sm100", "sm103"):
            assert row["attention_backend"] == "trtllm_mha"
        if row["model"].startswith(("nvidia/Gemma", "google/gemma")):
            assert "trtllm_mha applies FP8 KV-cache scales here (sglang#28144)" in row["note"]


def test_explain_with_force_shows_the_rule_only_where_it_applies() -> None:
    done = cli("explain", "--json", SGLANG_NVFP4_PATCHES_FORCE="gemma4-attention")
    assert done.returncode == 0, done.stderr[-3000:]
    for row in json_lines(done.stdout):
        affected = row["model"] == NVFP4_MOE and row["gpu"] in ("sm100", "sm103")
        assert ("gemma4-attention" in row["decided_by"]) is affected, row
        if affected:
            assert row["unpatched_attention_backend"] == "trtllm_mha"
            assert row["attention_backend"] == "triton"
            assert row["moe_runner_backend"] == "flashinfer_trtllm"
        else:
            assert row["attention_backend"] == row["unpatched_attention_backend"]


@pytest.mark.release_matrix
def test_explain_table_is_readable() -> None:
    done = run_cli_once("explain", "--gpu", "sm100")  # the README quotes it too
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith("model") and "decided by" in lines[0]
    nvfp4_moe = [line for line in lines if line.startswith(NVFP4_MOE)]
    assert len(nvfp4_moe) == 1
    # 0.5.14+: SGLang's trtllm_mha stands; 0.5.12.x/0.5.13.x pick triton themselves.
    fixed = ships(KV_SCALES_APPLIED)
    assert nvfp4_moe[0].split()[2] == ("trtllm_mha" if fixed else "triton")
    assert nvfp4_moe[0].rstrip().endswith("sglang")
    notes = [line for line in lines if line.startswith("note: ")]
    verdict = "applies FP8 KV-cache scales here" if fixed else "drops the FP8 KV-cache"
    assert any(verdict in note for note in notes), notes


def test_explain_honours_a_simulated_flag_and_no_patches() -> None:
    model = str(GEMMA4_NVFP4_MOE)
    flagged = cli(
        "explain", "--model", model, "--gpu", "sm100", "--attention-backend", "trtllm_mha", "--json"
    )
    unpatched = cli("explain", "--model", model, "--gpu", "sm103", "--no-patches", "--json")
    for done in (flagged, unpatched):
        assert done.returncode == 0, done.stderr[-3000:]
    (row,) = json_lines(flagged.stdout)
    assert row["attention_backend"] == "trtllm_mha" and row["decided_by"] == "user"
    (row,) = json_lines(unpatched.stdout)
    assert row["attention_backend"] == "trtllm_mha" and row["patched"] is False


def test_explain_rejects_a_directory_without_config(tmp_path) -> None:
    done = cli("explain", "--model", str(tmp_path), "--gpu", "sm100")
    assert done.returncode == 2
    assert "config.json" in done.stderr and "Traceback" not in done.stderr


def test_an_invalid_disable_setting_is_bad_input_naming_the_variable() -> None:
    done = cli(
        "explain",
        "--model",
        str(GEMMA4_NVFP4_MOE),
        "--gpu",
        "sm100",
        SGLANG_NVFP4_PATCHES_DISABLE="gemma-attention",
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith("error: SGLANG_NVFP4_PATCHES_DISABLE='gemma-attention'")
    assert "importing SGLang" not in done.stderr and "Traceback" not in done.stderr


def test_a_patch_disabled_on_purpose_is_noted_where_it_matters() -> None:
    done = cli(
        "explain", "--gpu", "sm100", "--json", SGLANG_NVFP4_PATCHES_DISABLE="gemma4-attention"
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {row["model"]: row for row in map(json.loads, done.stdout.splitlines())}
    assert set(rows) == set(BUNDLED_MODELS.values())
    off = "gemma4-attention is off (listed in SGLANG_NVFP4_PATCHES_DISABLE)"
    for model, row in rows.items():
        assert row["patched"] is True  # llama4-router-weight is still applied
        assert (off in row["note"]) is model.startswith(("google/gemma-4", "nvidia/Gemma-4")), row
    assert rows[NVFP4_MOE]["attention_backend"] == "trtllm_mha"
    assert rows[NVFP4_MOE]["decided_by"] == "sglang"


@pytest.mark.release_matrix
def test_explain_asks_sglang_which_runner_a_compressed_tensors_llama4_layer_gets() -> None:
    """Resolution says ``auto``; SGLang's compressed-tensors scheme decides at layer build."""
    import importlib
    import inspect

    from sglang_nvfp4_patches.llama4_router_weight.rule import COMPRESSED_TENSORS

    done = cli("explain", "--json", "--model", str(LLAMA4_NVFP4_CT), "--gpu", "sm120")
    assert done.returncode == 0, done.stderr[-3000:]
    (row,) = json_lines(done.stdout)
    if recorded_llama4_state(COMPRESSED_TENSORS.part) == "lifted, wrong":
        # refused when it is built, as doctor says: never computed wrong
        assert "computes something other than expert(x*w)" in row["moe_layer_refused"], row
        assert row["moe_layer_fails"] is None and "pre-scales" not in row["note"], row
        return
    scheme = getattr(importlib.import_module(COMPRESSED_TENSORS.module), COMPRESSED_TENSORS.cls)
    builds_cutlass = "FLASHINFER_CUTLASS" in inspect.getsource(scheme.create_moe_runner)
    assert (row["moe_layer_runner"] == "flashinfer_cutlass") is builds_cutlass, row
    assert ("pre-scales the top-1 router weight" in row["note"]) is builds_cutlass, row
