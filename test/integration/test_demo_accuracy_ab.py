"""``scripts/demo_accuracy_ab.py``: ab end to end on a stand-in, labelled DEMO everywhere."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from accuracy_support import PYTHON_DIR
from accuracy_support.processes import processes_naming

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


def _demo(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PYTHON_DIR), *sys.path])}
    command = [sys.executable, str(SCRIPT), *argv]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)


@pytest.fixture
def port_in_use() -> Iterator[int]:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        yield listener.getsockname()[1]


def test_its_own_failures_are_one_line_and_never_1(tmp_path: Path, port_in_use: int) -> None:
    """Once tracebacks and exit 1 (ab's "B is worse") for each of these; /dev/zero as the key
    grew to 3 GB, and a JSON list was served as answers."""
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    binary = tmp_path / "binary"
    binary.write_bytes(bytes(range(256)))
    a_list = tmp_path / "list.json"
    a_list.write_text('["A", "B"]')
    key = tmp_path / "key.json"
    key.write_text('{"demo_algebra/0": "A"}')
    serve = ["serve", "--model-path", str(key), "--port"]
    cases = {
        "--out-dir /dev/full": ["--out-dir", "/dev/full"],
        "--out-dir an existing file": ["--out-dir", str(a_file / "demo")],
        "serve --port -1": [*serve, "-1"],
        "serve --port 70000": [*serve, "70000"],
        "serve on a port in use": [*serve, str(port_in_use)],
        "a missing --model-path": ["serve", "--model-path", str(tmp_path / "no"), "--port", "1"],
        "a binary --model-path": ["serve", "--model-path", str(binary), "--port", "1"],
        "--model-path /dev/zero": ["serve", "--model-path", "/dev/zero", "--port", "1"],
        "a JSON list as the key": ["serve", "--model-path", str(a_list), "--port", "1"],
    }
    wrong = {}
    for name, argv in cases.items():
        done = _demo(*argv)
        errors = [line for line in done.stderr.splitlines() if line.startswith(("error:", "demo"))]
        if done.returncode != 2 or "Traceback" in done.stderr or len(errors) != 1:
            wrong[name] = (done.returncode, done.stderr[-600:])
    assert wrong == {}


def test_ctrl_c_stops_ab_which_stops_its_servers(tmp_path: Path) -> None:
    """Once ``kill -INT`` of the demo SIGKILLed ab and left the stand-in server running."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PYTHON_DIR), *sys.path])}
    out = tmp_path / "demo"
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), "--out-dir", str(out)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    key = str(out / "DEMO-answer-key.json")
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not processes_naming(key, "serve", "--port"):
            time.sleep(0.01)
        assert processes_naming(key, "serve", "--port")  # a stand-in server is running
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        for pid, _ in processes_naming(key):
            os.kill(pid, signal.SIGKILL)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert stderr.splitlines()[-2].startswith("interrupted; servers stopped")
    assert processes_naming(key) == []
