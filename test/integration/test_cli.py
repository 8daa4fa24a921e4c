"""`explain` and `doctor` as a user runs them: fresh processes, real SGLang, simulated GPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from packaging.version import Version

from sglang_nvfp4_patches.explain import BUNDLED_MODELS
from support.configs import GEMMA4_NVFP4_MOE, LLAMA4_NVFP4_CT
from support.release import installed_sglang
from support.sglang_cpu import runner_module_present

NVFP4_MOE = "nvidia/Gemma-4-26B-A4B-NVFP4"


def cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("SGLANG_NVFP4")}
    environment.pop("SGLANG_PLUGINS", None)
    environment.update(env)
    return subprocess.run(
        [sys.executable, "-m", "sglang_nvfp4_patches", *args],
        capture_output=True,
        text=True,
        env=environment,
        timeout=300,
        check=False,
    )


def json_lines(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


@pytest.fixture(scope="module")
def explain_all() -> list[dict]:
    done = cli("explain", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    return json_lines(done.stdout)


def test_explain_covers_every_bundled_model_on_every_gpu(explain_all: list[dict]) -> None:
    assert len(explain_all) == len(BUNDLED_MODELS) * 4
    assert {(r["model"], r["gpu"]) for r in explain_all} == {
        (m, g) for m in BUNDLED_MODELS.values() for g in ("sm90", "sm100", "sm103", "sm120")
    }
    for row in explain_all:
        assert {"model", "gpu", "attention_backend", "moe_runner_backend", "decided_by"} <= set(row)


def test_explain_shows_the_gemma4_fix_only_where_it_applies(explain_all: list[dict]) -> None:
    for row in explain_all:
        affected = row["model"] == NVFP4_MOE and row["gpu"] in ("sm100", "sm103")
        assert (row["decided_by"] == "gemma4-attention") is affected, row
        if affected:
            assert row["unpatched_attention_backend"] == "trtllm_mha"
            assert row["attention_backend"] == "triton"
            assert row["moe_runner_backend"] == "flashinfer_trtllm"
        else:
            assert row["attention_backend"] == row["unpatched_attention_backend"]
        if row["gpu"] in ("sm100", "sm103") and row["model"].startswith(
            ("google/", "nvidia/Gemma-4-31B")
        ):
            assert row["attention_backend"] == "trtllm_mha"


@pytest.mark.release_matrix
def test_explain_table_is_readable() -> None:
    done = cli("explain", "--gpu", "sm100")
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith("model") and "decided by" in lines[0]
    nvfp4_moe = [line for line in lines if line.startswith(NVFP4_MOE)]
    assert len(nvfp4_moe) == 1 and "trtllm_mha -> triton" in nvfp4_moe[0]
    assert nvfp4_moe[0].rstrip().endswith("gemma4-attention")


def test_explain_honours_a_simulated_flag_and_no_patches() -> None:
    model = str(GEMMA4_NVFP4_MOE)
    flagged = cli(
        "explain", "--model", model, "--gpu", "sm100", "--attention-backend", "trtllm_mha", "--json"
    )
    unpatched = cli("explain", "--model", model, "--gpu", "sm103", "--no-patches", "--json")
    for done in (flagged, unpatched):
        assert done.returncode == 0, done.stderr[-3000:]
    (row,) = json_lines(flagged.stdout)
    assert row["attention_backend"] == "trtllm_mha" and row["decided_by"] == "sglang"
    (row,) = json_lines(unpatched.stdout)
    assert row["attention_backend"] == "trtllm_mha" and row["patched"] is False


def test_explain_rejects_a_directory_without_config(tmp_path) -> None:
    done = cli("explain", "--model", str(tmp_path), "--gpu", "sm100")
    assert done.returncode == 2
    assert "config.json" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.release_matrix
def test_doctor_reports_what_sglang_holds() -> None:
    done = cli("doctor", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["sglang"] == installed_sglang()
    assert result["torch"] and result["flashinfer"]
    assert result["gpu"] == "none"
    assert set(result["patches"]) == {"gemma4-attention", "llama4-router-weight"}
    assert result["patches"]["gemma4-attention"]["status"] == "applied"
    assert (
        "verified: SGLang resolves it so on SM100"
        in result["patches"]["gemma4-attention"]["reason"]
    )
    router = result["patches"]["llama4-router-weight"]
    if runner_module_present():
        # 0.5.22+ pre-scale in the runner, but every release up to 0.5.23 still has the
        # ModelOpt NVFP4 rejection, so something is always applied.
        assert router["status"] == "applied"
        upstream = Version(installed_sglang()) >= Version("0.5.22")
        assert ("runner pre-scale: upstream" in router["reason"]) is upstream
    else:
        assert router["status"] == "not applicable"
        assert "no FlashInfer CUTLASS MoE runner" in router["reason"]
    for report in result["patches"].values():
        assert report["reason"]


def test_doctor_shows_disabled_and_fails_on_a_bad_setting() -> None:
    disabled = cli("doctor", "--json", SGLANG_NVFP4_PATCHES_DISABLE="gemma4-attention")
    assert disabled.returncode == 0, disabled.stderr[-3000:]
    assert json.loads(disabled.stdout)["patches"]["gemma4-attention"]["status"] == "disabled"
    broken = cli("doctor", SGLANG_NVFP4_PATCHES_DISABLE="gemma-attention")
    assert broken.returncode == 1
    assert "failed" in broken.stdout and "gemma-attention" in broken.stdout


@pytest.mark.release_matrix
def test_explain_asks_sglang_which_runner_a_compressed_tensors_llama4_layer_gets() -> None:
    """Resolution says ``auto``; SGLang's compressed-tensors scheme decides at layer build."""
    import importlib
    import inspect

    from sglang_nvfp4_patches.flashinfer_cutlass_runner import COMPRESSED_TENSORS

    done = cli("explain", "--json", "--model", str(LLAMA4_NVFP4_CT), "--gpu", "sm120")
    assert done.returncode == 0, done.stderr[-3000:]
    (row,) = json_lines(done.stdout)
    scheme = getattr(importlib.import_module(COMPRESSED_TENSORS.module), COMPRESSED_TENSORS.cls)
    builds_cutlass = "FLASHINFER_CUTLASS" in inspect.getsource(scheme.create_moe_runner)
    assert (row["moe_layer_runner"] == "flashinfer_cutlass") is builds_cutlass, row
    assert ("pre-scales the top-1 router weight" in row["note"]) is builds_cutlass, row
