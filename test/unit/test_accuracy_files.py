"""Special files (FIFOs, devices, huge files) and the run-file lock.

Each special-file case runs the command in a fresh process whose address space is capped
(``resource.setrlimit`` in the child) and with a time limit: a command that read
``/dev/zero`` to the end would die of MemoryError, one that opened a FIFO would hang, and
either shows up as a wrong exit status instead of a hung or killed test run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from accuracy_support import PYTHON_DIR
from accuracy_support.dataset_writer import write_dataset
from accuracy_support.fake_server import FakeServer, Script
from sglang_nvfp4_patches.accuracy.errors import BusyError
from sglang_nvfp4_patches.accuracy.limits import MAX_FILE_BYTES
from sglang_nvfp4_patches.accuracy.store import RUN_FORMAT, lock_path, run_file_lock

MEMORY_CAP = 1024 * 2**20  # the CLI needs about 210 MB of address space
_CAPPED = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, ({cap}, {cap}))
from sglang_nvfp4_patches.cli import main
sys.exit(main(sys.argv[1:]))
"""
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PYTHON_DIR), *sys.path])}


def run_capped(*argv: str, stdout: int = subprocess.PIPE) -> subprocess.CompletedProcess[str]:
    """``python -m sglang_nvfp4_patches ARGV`` with its memory capped; 60 s at most."""
    return subprocess.run(
        [sys.executable, "-c", _CAPPED.format(cap=MEMORY_CAP), *argv],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
        timeout=60,
    )


def _run_file(path: Path) -> Path:
    record = {"id": "law/0", "subject": "law", "answer": "A", "prediction": "A", "correct": True}
    document = {"format": RUN_FORMAT, "version": 1, "complete": True, "records": [record]}
    path.write_text(json.dumps(document))
    return path


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _sparse(path: Path) -> Path:
    """A regular file past the size bound that takes no disk space."""
    with path.open("wb") as handle:
        handle.truncate(MAX_FILE_BYTES + 2**20)
    return path


def _sgl_eval_dir(root: Path, repeat: Callable[[Path], Path] | None, metrics: bool) -> Path:
    """An sgl-eval run directory whose output-rs0.jsonl (or metrics.json) is special."""
    run = root / "sgl_eval_gsm8k_20261201-101500"
    run.mkdir(parents=True)
    if repeat is None:
        (run / "output-rs0.jsonl").write_text('{"id": 1, "symbolic_correct": true}\n')
    else:
        repeat(run / "output-rs0.jsonl")
    if metrics:
        (run / "metrics.json").write_text("{}")
    else:
        _fifo(run / "metrics.json")
    return run


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer(Script(replies={})) as srv:
        yield srv


@pytest.mark.parametrize(
    ("case", "says"),
    [
        ("out-dev-full", "--out /dev/full: is a character device, not a regular file"),
        ("out-fifo", "is a FIFO (named pipe), not a regular file"),
        ("out-partial-fifo", "run.json.partial.jsonl: is a FIFO (named pipe), not a regular"),
        ("out-stdout-pipe", "--out /dev/stdout: is a FIFO (named pipe), not a regular file"),
    ],
)
def test_run_refuses_a_special_out_before_any_request(
    tmp_path: Path, server: FakeServer, case: str, says: str
) -> None:
    write_dataset(tmp_path / "mmlu", {"anatomy": 3})
    out = {
        "out-dev-full": Path("/dev/full"),
        "out-fifo": tmp_path / "fifo.json",
        "out-partial-fifo": tmp_path / "run.json",
        "out-stdout-pipe": Path("/dev/stdout"),
    }[case]
    if case == "out-fifo":
        _fifo(out)
    if case == "out-partial-fifo":
        _fifo(tmp_path / "run.json.partial.jsonl")
    argv = ["accuracy", "run", "--base-url", server.url, "--data", str(tmp_path / "mmlu")]
    done = run_capped(*argv, "--out", str(out))  # stdout is a pipe here
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: ") and says in done.stderr, done.stderr
    assert len(done.stderr.splitlines()) == 1 and done.stdout == ""
    assert sum(server.calls.values()) == 0 and server.bad_requests == []


@pytest.mark.parametrize(
    ("case", "says"),
    [
        ("dev-zero", "/dev/zero: is a character device, not a regular file"),
        ("fifo", "fifo.json: is a FIFO (named pipe), not a regular file"),
        ("huge", f"huge.json: is 513 MiB, more than the {MAX_FILE_BYTES // 2**20} MiB"),
        ("sgl-eval-repeat-fifo", "output-rs0.jsonl: is a FIFO (named pipe), not a regular"),
        ("sgl-eval-repeat-dev-zero", "output-rs0.jsonl: is a character device, not a regular"),
        ("sgl-eval-metrics-fifo", "metrics.json: is a FIFO (named pipe), not a regular file"),
    ],
)
def test_compare_refuses_a_special_or_huge_file(tmp_path: Path, case: str, says: str) -> None:
    good = str(_run_file(tmp_path / "good.json"))
    special = {
        "dev-zero": lambda: Path("/dev/zero"),
        "fifo": lambda: _fifo(tmp_path / "fifo.json"),
        "huge": lambda: _sparse(tmp_path / "huge.json"),
        "sgl-eval-repeat-fifo": lambda: _sgl_eval_dir(tmp_path, _fifo, metrics=True),
        "sgl-eval-repeat-dev-zero": lambda: _sgl_eval_dir(
            tmp_path, lambda path: path.symlink_to("/dev/zero") or path, metrics=True
        ),
        "sgl-eval-metrics-fifo": lambda: _sgl_eval_dir(tmp_path, None, metrics=False),
    }[case]()
    done = run_capped("accuracy", "compare", str(special), good)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: ") and says in done.stderr, done.stderr
    assert len(done.stderr.splitlines()) == 1 and done.stdout == ""


def test_ab_refuses_a_special_run_file_before_any_server(tmp_path: Path) -> None:
    write_dataset(tmp_path / "mmlu", {"anatomy": 3})
    out = tmp_path / "ab"
    out.mkdir()
    _fifo(out / "B.json")
    marker = tmp_path / "server-started"
    launcher = f"{sys.executable} -c \"open({str(marker)!r}, 'w')\""
    done = run_capped(
        *("accuracy", "ab", "--model-path", "m", "--data", str(tmp_path / "mmlu")),
        *("--out-dir", str(out), "--launcher", launcher),
    )
    assert done.returncode == 2, done.stderr
    says = f"error: side B: {out / 'B.json'}: is a FIFO (named pipe), not a regular file"
    assert done.stderr.startswith(says) and len(done.stderr.splitlines()) == 1
    assert not marker.exists()


def test_a_second_writer_is_refused_while_the_first_holds_the_lock(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    with run_file_lock(out, "--out"):
        assert lock_path(out).read_text() == f"{os.getpid()}\n"
        refused = pytest.raises(BusyError, match=rf"^--out {out}: process {os.getpid()} is writing")
        with refused, run_file_lock(out, "--out"):
            pass  # pragma: no cover - the lock must refuse
    assert not lock_path(out).exists()  # removed by its holder on the way out
    with run_file_lock(out, "--out"):  # and free again
        pass


_HOLD = """
import sys, time
from pathlib import Path
from sglang_nvfp4_patches.accuracy.store import run_file_lock
with run_file_lock(Path(sys.argv[1]), "--out"):
    print("locked", flush=True)
    time.sleep(120)
"""


def test_the_lock_dies_with_its_process(tmp_path: Path) -> None:
    """SIGKILL runs no clean-up: the lock file stays, but the kernel drops the lock."""
    out = tmp_path / "run.json"
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(out)], env=ENV, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        refused = pytest.raises(BusyError, match=f"process {holder.pid} is writing")
        with refused, run_file_lock(out, "--out"):
            pass  # pragma: no cover - the lock must refuse
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    assert lock_path(out).exists()
    with run_file_lock(out, "--out"):
        assert lock_path(out).read_text() == f"{os.getpid()}\n"
