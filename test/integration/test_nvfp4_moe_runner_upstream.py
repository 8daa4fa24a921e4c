"""``nvfp4-moe-runner`` on simulated next releases (0.5.23's code under ``0.5.24.dev0``, opted
in), where no record shipped with the plugin matches:

* before ``verify``, the patch cannot tell: ``doctor`` says ``unknown`` and to run ``verify``
  (``test_next_release.py``), and a plain launch is left as SGLang ships it;
* with sglang#39807's two changes (``create_moe_runner`` picks CUTLASS on SM12x, and the weights
  follow the runner it picked): ``verify`` records SGLang's own layer serving on SM120/SM121,
  the patch stands down there and ``doctor`` and ``explain`` say so, while Llama 4 on SM10X
  (untouched by the fix) still gets ``flashinfer_cutlass``: the record ``verify`` wrote is
  what ``doctor`` reads.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from support import SCRIPTS, edited_sglang, result_of
from support.edited_sglang import MODELOPT, NEXT_RELEASE, make_edited_copy, moe_runner_fix_39807
from support.forkserver import json_lines, server

CLI = str(Path(edited_sglang.__file__))
# verify's check process for this patch, on the copy (verify itself starts fresh interpreters,
# which would import the installed SGLang, not the copy a fork-server child puts first)
PROBE = str(SCRIPTS / "next_release_probe.py")
THIRD = "nvfp4-moe-runner"
OPT_IN = {"SGLANG_NVFP4_PATCHES_UNTESTED": "apply"}
SCOUT = "Llama-4-Scout-17B-16E-Instruct-FP4"
GEMMA = "Gemma-4-26B-A4B-NVFP4"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    copies = {
        "fixed": make_edited_copy(
            tmp_path_factory.mktemp("fix39807"), {MODELOPT: moe_runner_fix_39807}, NEXT_RELEASE
        ),
    }
    fork = server().zygote(copies["fixed"])  # the copy's modules, imported once
    env = {
        name: {**OPT_IN, "SGLANG_NVFP4_PATCHES_RECORDS": str(tmp_path_factory.mktemp(name))}
        for name in copies
    }

    def start(name: str, *args: str) -> Any:
        return fork.start([CLI, str(copies[name]), *args], env[name])

    def verify(name: str) -> Any:
        return fork.start([PROBE, str(copies[name]), f"verify-{THIRD}"], env[name])

    first = {"verify fixed": verify("fixed")}
    done = {name: child.wait(timeout=600) for name, child in first.items()}
    then = {
        "doctor fixed": start("fixed", "doctor", "--json"),
        "explain fixed": start("fixed", "explain", "--json", "--gpu", "sm120"),
    }
    done.update({name: child.wait(timeout=600) for name, child in then.items()})
    fork.close()
    return done


def third(done: Any) -> dict[str, str]:
    return json.loads(done.stdout)["patches"][THIRD]


def checks(done: Any) -> dict[str, dict[str, Any]]:
    return {line["check"]: line for line in result_of(done)}


def test_verify_records_sglangs_own_layer_serving_on_sm12x(runs: dict) -> None:
    found = checks(runs["verify fixed"])
    # a stand-in none of whose launches is left to the patch any more has nothing to check
    assert {line["outcome"] for line in found.values()} <= {"held", "n/a"}, found
    evidence = found["evidence (SGLang as it ships)"]
    assert evidence["outcome"] == "held" and "recorded in " in evidence["reason"]
    assert "upstream" in evidence["reason"] and "live" in evidence["reason"]
    scout = found[f"nvidia/{SCOUT}, no flags and --quantization modelopt_fp4, every Blackwell GPU"]
    assert scout["outcome"] == "held"
    for gpu in ("sm120", "sm121"):
        assert f"{gpu}, no --quantization: upstream, auto published" in scout["reason"]
    # the fix leaves SM10X's TRT-LLM pick: Llama 4 there still gets the CUTLASS runner
    assert "sm100, no --quantization: flashinfer_cutlass serves" in scout["reason"]


def test_after_verify_the_patch_stands_down_on_sm12x_and_says_so(runs: dict) -> None:
    done = runs["doctor fixed"]
    # exit 1 only for llama4-router-weight: verify ran this patch's checks alone, so no row
    # holds Llama 4's cells for these sources and its parts are unknown
    patches = json.loads(done.stdout)["patches"]
    unfixed = {name for name, p in patches.items() if p["status"] in ("unknown", "failed")}
    assert done.returncode == 1 and unfixed == {"llama4-router-weight"}, done.stderr[-3000:]
    report = third(done)
    assert report["status"] == "applied"  # SM10X, where the fix changes nothing
    reason = report["reason"]
    assert (
        "no --quantization: silu, top-1 on sm100, sm103; silu, top-k on sm100, sm103 get "
        "flashinfer_cutlass ("
    ) in reason, reason
    assert (
        "no --quantization: gelu, top-k on sm120, sm121; silu, top-1 on sm120, sm121; silu, "
        "top-k on sm120, sm121 are upstream (SGLang's own layer serves"
    ) in reason, reason
    assert "evidence: recorded by verify on this machine" in reason


def test_after_verify_explain_shows_sglangs_own_runner_on_sm120(runs: dict) -> None:
    done = runs["explain fixed"]
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {row["model"].split("/")[-1]: row for row in json_lines(done.stdout)}
    for model in (SCOUT, GEMMA):
        row = rows[model]
        assert row["moe_runner_backend"] == row["unpatched_moe_runner_backend"] == "auto"
        assert row["decided_by"] == "sglang" and row["moe_layer_runner"] == "flashinfer_cutlass"
        assert row["moe_layer_fails"] is None
    assert rows[GEMMA]["unpatched_fails_at_warmup"] is None  # SGLang's own layer serves
    # Llama 4 as SGLang ships: its own CUTLASS layer still rejects the router weight
    assert "apply_router_weight_on_input" in rows[SCOUT]["unpatched_fails_at_warmup"]
