"""A build whose ``trtllm_mha_backend.py`` is no tested release's (here 0.5.x's with one comment
line added: the same code) has no row of release facts: the root cause is unknown, counted as
live, so the rule acts, and ``doctor`` and ``explain`` say how to check. Reading the code could
prove the bug present, never absent (docs/gemma4-attention.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sglang_nvfp4_patches.gemma4_attention.rule import ROOT_CAUSE_ISSUE
from sglang_nvfp4_patches.gemma4_attention.rule_state import HOW_TO_CHECK, NO_FACTS
from sglang_nvfp4_patches.simulation.bundled import EXAMPLES_DIR
from support import edited_sglang
from support.edited_sglang import BACKEND, a_line_added, make_edited_copy
from support.forkserver import json_lines, server

CLI = Path(edited_sglang.__file__)
NVFP4_MOE_FP8_KV = EXAMPLES_DIR / "gemma-4-26b-a4b-nvfp4"  # kv_cache_scheme: 8-bit float
UNKNOWN = f"root cause unknown, counted as live: {NO_FACTS} ({ROOT_CAUSE_ISSUE}); {HOW_TO_CHECK}"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """``doctor --json`` and ``explain --gpu sm100 --json`` on the copy, together."""
    copy = make_edited_copy(tmp_path_factory.mktemp("commented"), {BACKEND: a_line_added})
    commands = {
        "doctor": ["doctor", "--json"],
        "explain": ["explain", "--gpu", "sm100", "--model", str(NVFP4_MOE_FP8_KV), "--json"],
    }
    started = {name: server().start([str(CLI), str(copy), *a]) for name, a in commands.items()}
    done = {name: child.wait(600) for name, child in started.items()}
    assert done["explain"].returncode == 0, done["explain"].stderr[-3000:]
    return {name: result.stdout for name, result in done.items()}


def test_doctor_says_unknown_and_how_to_check(runs: dict[str, str]) -> None:
    gemma4 = json.loads(runs["doctor"])["patches"]["gemma4-attention"]
    assert gemma4["status"] == "applied", gemma4
    assert UNKNOWN in gemma4["reason"]
    assert "(verified: SGLang resolves it to triton on SM100)" in gemma4["reason"]


def test_explain_gives_triton_saying_why(runs: dict[str, str]) -> None:
    (row,) = json_lines(runs["explain"])
    assert (row["attention_backend"], row["decided_by"]) == ("triton", "gemma4-attention"), row
    assert row["unpatched_attention_backend"] == "trtllm_mha"
    assert UNKNOWN in row["note"]
