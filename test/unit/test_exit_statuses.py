"""Each exit status the docs' list names, driven from a real input, and nothing else: the
list and the command line agree on one meaning per code (SGLang is never imported here)."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from accuracy_support import PYTHON_DIR
from accuracy_support.dataset_writer import write_dataset
from accuracy_support.fake_server import FakeServer, Script
from sglang_nvfp4_patches import cli

REPO = PYTHON_DIR.parent
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PYTHON_DIR), *sys.path])}


def documented_statuses() -> set[int]:
    """The statuses of the exit-status list in docs/commands.md (`- **N**: meaning`)."""
    text = (REPO / "docs" / "commands.md").read_text()
    section = text[text.index("## Exit statuses") :].split("\n## ")[0]
    return {int(code) for code in re.findall(r"^- \*\*(\d+)\*\*: ", section, re.M)}


def _run_file(path: Path, right: int, n: int = 40) -> str:
    records = [
        {"id": f"law/{i}", "subject": "law", "answer": "A", "prediction": p, "correct": p == "A"}
        for i, p in enumerate("A" * right + "B" * (n - right))
    ]
    head = {"format": "sglang-nvfp4-patches/accuracy-run", "version": 1, "side": path.name}
    path.write_text(json.dumps({**head, "records": records}))
    return str(path)


def _fresh(argv: list[str], **streams: object) -> int:
    command = [sys.executable, "-m", "sglang_nvfp4_patches", *argv]
    done = subprocess.run(command, env=ENV, stderr=subprocess.DEVNULL, timeout=120, **streams)  # type: ignore[call-overload]
    return done.returncode


def _same(tmp: Path) -> int:
    return cli.main(["accuracy", "compare", _run_file(tmp / "a", 30), _run_file(tmp / "b", 30)])


def _worse(tmp: Path) -> int:
    return cli.main(["accuracy", "compare", _run_file(tmp / "a", 40), _run_file(tmp / "b", 10)])


def _bad_input(tmp: Path) -> int:
    return cli.main(["accuracy", "compare", str(tmp / "missing.json"), str(tmp / "b.json")])


def _unanswered(tmp: Path) -> int:
    questions = write_dataset(tmp / "mmlu", {"anatomy": 3})
    with FakeServer(Script(replies={}, reject=dict.fromkeys(questions, 400))) as server:
        argv = ["accuracy", "run", "--base-url", server.url, "--data", str(tmp / "mmlu")]
        return cli.main([*argv, "--out", str(tmp / "r.json"), "--no-progress"])


def _bug(tmp: Path) -> int:
    # A defect planted in our own code: the one way to reach 70 on purpose.
    from sglang_nvfp4_patches.accuracy import compare

    def broken(*_: object, **__: object) -> None:
        raise ZeroDivisionError("planted")

    original, compare.compare_runs = compare.compare_runs, broken  # type: ignore[assignment]
    try:
        return _same(tmp)
    finally:
        compare.compare_runs = original


def _environment(tmp: Path) -> int:
    with open("/dev/full", "wb") as full:
        argv = ["accuracy", "compare", _run_file(tmp / "a", 30), _run_file(tmp / "b", 30)]
        return _fresh(argv, stdout=full)


def _interrupted(tmp: Path) -> int:
    write_dataset(tmp / "mmlu", {"anatomy": 2})
    with socket.socket() as silent:  # accepts, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        argv = ["accuracy", "run", "--base-url", url, "--data", str(tmp / "mmlu")]
        command = [sys.executable, "-m", "sglang_nvfp4_patches", *argv, "--out", str(tmp / "r")]
        proc = subprocess.Popen(command, env=ENV, stderr=subprocess.DEVNULL)
        time.sleep(1.5)
        proc.send_signal(signal.SIGTERM)
        return proc.wait(timeout=60)


def _reader_left(tmp: Path) -> int:
    read, write = os.pipe()
    os.close(read)  # the reader is gone before anything is written
    try:
        argv = ["accuracy", "compare", _run_file(tmp / "a", 30), _run_file(tmp / "b", 30)]
        return _fresh(argv, stdout=write)
    finally:
        os.close(write)


DRIVERS: dict[int, Callable[[Path], int]] = {
    0: _same,
    1: _worse,
    2: _bad_input,
    3: _unanswered,
    70: _bug,
    71: _environment,
    130: _interrupted,
    141: _reader_left,
}


def test_the_table_lists_exactly_the_statuses_driven_here() -> None:
    assert documented_statuses() == set(DRIVERS)


@pytest.mark.parametrize("status", sorted(DRIVERS))
def test_each_documented_status_comes_from_its_input(
    status: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 70's traceback file lands here (tempfile reads $TMPDIR once, so its cached answer is set)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert DRIVERS[status](tmp_path) == status
