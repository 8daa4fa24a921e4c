"""``scripts/demo_accuracy_ab.py``: ab end to end on a stand-in, labelled DEMO everywhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from accuracy_support import PYTHON_DIR

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "demo_accuracy_ab.py"
BANNER = "DEMO: scripted stand-in server, not SGLang, no GPU; these numbers measure nothing"


def test_the_demo_runs_ab_and_says_demo_before_and_after(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PYTHON_DIR), *sys.path])}
    out = tmp_path / "demo"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--out-dir", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr  # the stand-in answers worse with trtllm_mha
    lines = done.stderr.splitlines()
    assert (lines[0], lines[-1]) == (BANNER, BANNER)
    assert "B is significantly worse than A" in done.stdout
    runs = [json.loads((out / f"{side}.json").read_text()) for side in "AB"]
    assert {run["server"]["model_path"] for run in runs} == {str(out / "DEMO-answer-key.json")}
    assert all(subject.startswith("demo_") for run in runs for subject in run["per_subject"])
    # The verdict is the hand count of the two run files' discordant pairs.
    right = [{r["id"]: r["correct"] for r in run["records"]} for run in runs]
    b = sum(right[0][q] and not right[1][q] for q in right[0])
    c = sum(right[1][q] and not right[0][q] for q in right[0])
    assert f"discordant pairs: b = {b} (A right, B wrong), c = {c}" in done.stdout and b > c
    for side in "AB":
        start, banner = (out / f"{side}.server.log").read_text().splitlines()[:2]
        assert ": accuracy ab starts " in start and banner.startswith(BANNER)
