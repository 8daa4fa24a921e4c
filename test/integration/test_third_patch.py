"""A third patch is one package and its line in ``patches.py``, besides the package docstring
that names every patch: ``nvfp4-moe-runner`` is named nowhere else in the plugin, yet
``doctor``, ``explain`` and ``verify`` cover it as they cover the other two (its state, its
note and what it decided on a row, its checks in a fresh process of their own).

This is also where ``verify`` runs as the command a user types (fresh check processes, one
per patch: the README's run of it, shared with ``test_docs_outputs.py``): every patch's checks
must hold there too. It runs on the primary release; ``scripts/test_release.sh`` runs
``verify`` on every other one.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from sglang_nvfp4_patches.patches import PATCHES
from support.configs import LLAMA4_NVFP4
from support.forkserver import json_lines, run_cli_once

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "sglang_nvfp4_patches"
THIRD = "nvfp4-moe-runner"
ALL = {patch.name for patch in PATCHES}


def test_the_third_patch_is_named_only_in_its_package_and_the_patch_lists() -> None:
    assert [patch.name for patch in PATCHES][-1] == THIRD
    naming = re.compile(r"nvfp4_moe_runner|nvfp4-moe-runner")
    outside = sorted(
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if naming.search(path.read_text(encoding="utf-8"))
        and path.parent.name != "nvfp4_moe_runner"
    )
    assert outside == ["__init__.py", "patches.py"]


@pytest.fixture(scope="module")
def commands() -> dict[str, dict]:
    # the runs test_doctor.py, test_explain_layer.py and the README (verify) make too
    done = {
        "doctor": run_cli_once("doctor", "--json"),
        "explain": run_cli_once(
            "explain", "--json", "--model", str(LLAMA4_NVFP4), "--gpu", "sm120"
        ),
        "verify": run_cli_once("verify"),
    }
    return {
        name: {"exit": d.returncode, "stdout": d.stdout, "stderr": d.stderr}
        for name, d in done.items()
    }


def test_doctor_reads_the_third_patch_back(commands: dict[str, dict]) -> None:
    doctor = commands["doctor"]
    assert doctor["exit"] == 0, doctor["stderr"][-3000:]
    patches = json.loads(doctor["stdout"])["patches"]
    assert set(patches) == ALL
    assert patches[THIRD]["reason"]


def test_explain_gives_the_third_patch_its_note_and_its_decision(
    commands: dict[str, dict],
) -> None:
    explain = commands["explain"]
    assert explain["exit"] == 0, explain["stderr"][-3000:]
    (row,) = json_lines(explain["stdout"])
    assert f"{THIRD}: a ModelOpt NVFP4 MoE checkpoint" in row["note"]
    if row["moe_runner_backend"] != row["unpatched_moe_runner_backend"]:
        assert row["decided_by"] == THIRD


def test_verify_runs_every_patch_in_its_own_process(commands: dict[str, dict]) -> None:
    verify = commands["verify"]
    *lines, summary = verify["stdout"].splitlines()
    outcomes = [line.split(None, 1) for line in lines]  # "held    patch: check: reason"
    assert {rest.split(":", 1)[0] for _, rest in outcomes} == ALL
    import sglang

    assert f" on SGLang {sglang.__version__} (" in summary  # the SGLang it imported
    assert {outcome for outcome, _ in outcomes} <= {"held", "n/a"}, lines
    third = [rest.split(": ", 2)[1] for _, rest in outcomes if rest.startswith(THIRD)]
    assert third[0] == "evidence (SGLang as it ships)" and len(third) == 8
    assert verify["exit"] == 0
