"""The rule follows its root cause, end to end in fresh processes that load the plugin the way
SGLang does (``support/scripts/gemma4_rule_probe.py``); only the environment differs:

* ``bug window``: this release as a nightly from May-June 2026 looked, sglang#28144's V-scale
  handoff reverted in a copy of its ``trtllm_mha_backend.py`` (``support/edited_sglang.py``);
  on 0.5.12.x/0.5.13.x the release itself, whose code still drops the scale.
* ``forced``: ``SGLANG_NVFP4_PATCHES_FORCE=gemma4-attention`` on this release as installed.

Expected values for the cases the rule leaves alone are SGLang's own, resolved in this
process with the rule suspended.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sglang_nvfp4_patches.gemma4_attention import rule_state as root_cause
from sglang_nvfp4_patches.gemma4_attention.rule import KvScaleHandoff
from sglang_nvfp4_patches.supported_releases import sglang_version
from support import SCRIPTS
from support.configs import GEMMA4_BF16_MOE, GEMMA4_NVFP4_MOE
from support.edited_sglang import make_bug_window_copy
from support.forkserver import server
from support.gemma4_cases import resolved
from support.release import KV_SCALES_APPLIED, ships

pytestmark = pytest.mark.release_matrix
PROBE = SCRIPTS / "gemma4_rule_probe.py"


def bf16_kv_copy(target: Path) -> Path:
    """The NVFP4 MoE stand-in without a KV-cache scheme: ``auto`` gives a BF16 KV cache."""
    config = json.loads((GEMMA4_NVFP4_MOE / "config.json").read_text())
    del config["quantization_config"]["kv_cache_scheme"]
    target.mkdir(parents=True)
    (target / "config.json").write_text(json.dumps(config))
    return target


def cases(bf16_kv: Path) -> list[dict]:
    fp8 = str(GEMMA4_NVFP4_MOE)
    return [
        {"model": fp8, "gpu": "sm100", "flags": {}},
        {"model": fp8, "gpu": "sm103", "flags": {}},
        {"model": fp8, "gpu": "sm90", "flags": {}},
        {"model": fp8, "gpu": "sm120", "flags": {}},
        {"model": fp8, "gpu": "sm100", "flags": {"attention_backend": "trtllm_mha"}},
        {"model": fp8, "gpu": "sm100", "flags": {"attention_backend": "triton"}},
        {"model": fp8, "gpu": "sm100", "flags": {"kv_cache_dtype": "bfloat16"}},
        {
            "model": fp8,
            "gpu": "sm100",
            "flags": {"kv_cache_dtype": "bfloat16", "attention_backend": "trtllm_mha"},
        },
        {"model": str(bf16_kv), "gpu": "sm100", "flags": {}},
        {"model": str(bf16_kv), "gpu": "sm100", "flags": {"attention_backend": "trtllm_mha"}},
        {"model": str(bf16_kv), "gpu": "sm100", "flags": {"kv_cache_dtype": "fp8_e4m3"}},
        {"model": str(GEMMA4_BF16_MOE), "gpu": "sm100", "flags": {}},
    ]


def sglang_own(case: dict) -> str:
    try:
        return resolved(Path(case["model"]), case["gpu"], patched=False, **case["flags"])[
            "attention_backend"
        ]
    except ValueError as rejected:
        return f"ValueError: {rejected}"


def start_fresh(case_list: list[dict], pythonpath: str) -> subprocess.Popen:
    """A new interpreter with ``pythonpath`` first: it imports another SGLang tree."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("SGLANG_NVFP4")}
    environment.pop("SGLANG_PLUGINS", None)
    environment["PYTHONPATH"] = os.pathsep.join(
        p for p in (pythonpath, environment.get("PYTHONPATH")) if p
    )
    return subprocess.Popen(
        [sys.executable, str(PROBE), json.dumps(case_list)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
    )


def start_forked(case_list: list[dict], **env: str) -> Any:
    """A process forked from the session's fork server (``support/forkserver.py``)."""
    return server().start([str(PROBE), json.dumps(case_list)], env)


def finish(process: Any) -> dict:
    if isinstance(process, subprocess.Popen):
        stdout, stderr = process.communicate(timeout=600)
        returncode = process.returncode
    else:
        done = process.wait(600)
        stdout, stderr, returncode = done.stdout, done.stderr, done.returncode
    assert returncode == 0, stderr[-3000:]
    (line,) = [x for x in stdout.splitlines() if x.startswith("RESULT ")]
    return json.loads(line[len("RESULT ") :])


@pytest.fixture(scope="module")
def scenarios(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[list[dict], dict]]:
    """Every scenario's probe, started together (two cores) and collected once."""
    case_list = cases(bf16_kv_copy(tmp_path_factory.mktemp("bf16kv") / "model"))
    if root_cause.kv_scale_verdict().bug_live:  # 0.5.12.x/0.5.13.x: the release itself
        window = start_forked(case_list)
    else:
        window = start_fresh(
            case_list, str(make_bug_window_copy(tmp_path_factory.mktemp("bug_window")))
        )
    started = {
        "bug window": window,
        "forced": start_forked(case_list, SGLANG_NVFP4_PATCHES_FORCE="gemma4-attention"),
        "forced and disabled": start_forked(
            case_list[:1],
            SGLANG_NVFP4_PATCHES_FORCE="gemma4-attention",
            SGLANG_NVFP4_PATCHES_DISABLE="gemma4-attention",
        ),
        "invalid force": start_forked(
            case_list[:1], SGLANG_NVFP4_PATCHES_FORCE="llama4-router-weight"
        ),
    }
    return {name: (case_list, finish(process)) for name, process in started.items()}


@pytest.fixture(scope="module")
def own(scenarios: dict) -> list[str]:
    """SGLang's own answer for every case (resolved once, here, with the rule suspended)."""
    case_list, _ = scenarios["bug window"]
    return [sglang_own(case) for case in case_list]


def answers(result: dict) -> tuple[list[str], list[list[str]]]:
    """The attention backend each case got, and the WARNINGs each logged of this patch (the
    bug window's copy has other sources than any row of release facts, so another patch may
    say it cannot tell there)."""
    return (
        [case["attention_backend"] for case in result["cases"]],
        [
            [line for line in case["warnings"] if not line.startswith("[llama4-router-weight]")]
            for case in result["cases"]
        ],
    )


def test_release_facts_give_the_verdict_per_release() -> None:
    """0.5.12.x/0.5.13.x drop the V scale; 0.5.14+ carry sglang#28144 (their rows say so)."""
    verdict = root_cause.kv_scale_verdict()
    live = not ships(KV_SCALES_APPLIED)
    assert verdict.handoff is (KvScaleHandoff.DROPPED if live else KvScaleHandoff.APPLIED)
    assert f"FP8 KV-cache path: {verdict.handoff.value}, recorded by CI" in verdict.evidence


def test_bug_window_build_gets_the_rule_without_force(scenarios: dict, own: list[str]) -> None:
    _, result = scenarios["bug window"]
    assert result["sglang"] == sglang_version()  # same version string, reverted code
    assert result["mode"] == "live"
    # asked through the seam as SGLang imports it, as nvfp4-moe-runner's question is
    assert result["state"]["status"] == "pending"
    if root_cause.kv_scale_verdict().bug_live:  # the release itself: its row of release facts
        assert "FP8 KV-cache path: dropped, recorded by CI for" in result["state"]["reason"]
    else:  # an edited copy, which no row has: unknown, counted as live, and how to check
        assert (
            f"root cause unknown, counted as live: {root_cause.NO_FACTS}"
            in (result["state"]["reason"])
        )
    assert result["imported_at_load"] == []
    got, warned = answers(result)
    # FP8 KV cache on SM10X, nothing given: triton; other GPUs: SGLang's own.
    assert got[:4] == ["triton", "triton", own[2], own[3]]
    # explicit trtllm_mha: honoured, one WARNING naming the cause and both ways out
    assert got[4] == "trtllm_mha" and len(warned[4]) == 1
    assert "drops the FP8 KV-cache scales" in warned[4][0]
    assert "--attention-backend triton" in warned[4][0]
    assert "--kv-cache-dtype bfloat16" in warned[4][0]
    assert got[5] == "triton"
    # BF16 KV cache, by flag or by checkpoint: trtllm_mha is accurate, SGLang's default stands
    assert got[6:10] == own[6:10]
    # an FP8 KV cache asked for on a BF16-KV checkpoint is FP8 again
    assert got[10] == "triton"
    assert got[11] == own[11]
    assert [w for i, w in enumerate(warned) if i != 4] == [[]] * (len(warned) - 1)


def test_force_applies_the_rule_26791_on_this_release(scenarios: dict, own: list[str]) -> None:
    _, result = scenarios["forced"]
    assert result["mode"] == "forced"
    assert result["state"]["status"] == "pending"
    assert "forced by SGLANG_NVFP4_PATCHES_FORCE" in result["state"]["reason"]
    assert result["imported_at_load"] == []
    got, warned = answers(result)
    assert got[:4] == ["triton", "triton", own[2], own[3]]
    assert got[4] == "trtllm_mha" and len(warned[4]) == 1  # explicit: honoured, said so
    assert "SGLANG_NVFP4_PATCHES_FORCE" in warned[4][0]
    # #26791's rule does not look at the KV cache: forced means forced
    assert got[6] == got[8] == got[10] == "triton"
    assert got[7] == got[9] == "trtllm_mha"
    assert got[11] == own[11]


def test_disable_wins_over_force(scenarios: dict) -> None:
    case_list, result = scenarios["forced and disabled"]
    assert result["state"] == {
        "status": "disabled",
        "reason": "listed in SGLANG_NVFP4_PATCHES_DISABLE",
    }
    assert answers(result)[0] == [sglang_own(case_list[0])]
    (warning,) = result["load_warnings"]
    assert "stays disabled" in warning


def test_invalid_force_is_one_error_and_forces_nothing(scenarios: dict) -> None:
    case_list, result = scenarios["invalid force"]
    (error,) = result["load_warnings"]
    assert "llama4-router-weight cannot be forced" in error and "Nothing is forced" in error
    expected_mode = "live" if root_cause.kv_scale_verdict().bug_live else "fixed"
    assert result["mode"] == expected_mode
    expected = "triton" if expected_mode == "live" else sglang_own(case_list[0])
    assert answers(result)[0] == [expected]
