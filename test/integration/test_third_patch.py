"""A third patch is one package and one line in ``patches.py``: a stand-in declared in
``support/scripts/standin/`` appears in ``doctor``, ``explain`` and ``verify`` beside the two
real patches, with nothing else changed (``support/scripts/standin_probe.py``).

This is also where ``verify`` runs as the command a user types (fresh check processes, one
per patch, ``--json``): the real patches' checks must hold there too. It runs on the primary
release; ``scripts/test_release.sh`` runs ``verify`` on every other one.
"""

from __future__ import annotations

import json

import pytest

from support import SCRIPTS, result_of
from support.forkserver import run_python

REAL = {"gemma4-attention", "llama4-router-weight"}
STANDIN = "standin-patch"


@pytest.fixture(scope="module")
def commands() -> dict[str, dict]:
    done = run_python([str(SCRIPTS / "standin_probe.py")], timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return result_of(done)


def test_doctor_reads_the_standin_back(commands: dict[str, dict]) -> None:
    doctor = commands["doctor"]
    patches = json.loads(doctor["stdout"])["patches"]
    assert set(patches) == REAL | {STANDIN}
    assert patches[STANDIN] == {"status": "applied", "reason": "stand-in read back"}
    assert doctor["exit"] == 0


def test_explain_gives_the_standin_its_rows_note_and_layer(commands: dict[str, dict]) -> None:
    explain = commands["explain"]
    (row,) = [json.loads(line) for line in explain["stdout"].splitlines()]
    assert row["moe_layer_runner"] == "standin-on-sm100"  # its explain_layer answered
    assert f"{STANDIN}: stand-in note for the standin-on-sm100 MoE runner" in row["note"]
    assert explain["exit"] == 0


def test_verify_runs_every_patch_in_its_own_process(commands: dict[str, dict]) -> None:
    verify = commands["verify"]
    lines = [json.loads(line) for line in verify["stdout"].splitlines()]
    assert {line["patch"] for line in lines} == REAL | {STANDIN}
    import sglang

    assert {line["sglang"] for line in lines} == {sglang.__version__}  # the one imported
    assert all(line["outcome"] in ("held", "n/a") for line in lines), lines
    (standin,) = [line for line in lines if line["patch"] == STANDIN]
    assert standin["reason"] == "installed once by register() in this fresh process"
    assert len(lines) >= 5  # Gemma 4's three, at least one for Llama 4, the stand-in's
    assert verify["exit"] == 0
