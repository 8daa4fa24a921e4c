"""``verify`` as a process: a broken SGLang means its checks could not run (no verdict, the
environment's status), and a script's ``kill`` stops its check processes and removes every
temporary file, its children's too, as Ctrl-C does."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from accuracy_support import PYTHON_DIR
from accuracy_support.processes import processes_naming
from accuracy_support.script_job import ScriptJob
from sglang_nvfp4_patches.errors import EXIT_ENVIRONMENT, EXIT_INTERRUPTED
from sglang_nvfp4_patches.patches import PATCHES
from sglang_nvfp4_patches.verify.run import CHILD_MODULE


def _env(**extra: str) -> dict[str, str]:
    path = os.pathsep.join([str(PYTHON_DIR), *sys.path])
    return {**os.environ, "PYTHONPATH": path, **extra}


def test_verify_on_a_broken_sglang_could_not_run_rather_than_failed(tmp_path: Path) -> None:
    """Once "FAILED ... 0 held, 2 failed" and exit 1: a contract verdict where no check ran."""
    broken = tmp_path / "sglang"
    broken.mkdir()
    (broken / "__init__.py").write_text("raise ImportError('half-installed')\n")
    path = os.pathsep.join([str(tmp_path), str(PYTHON_DIR), *sys.path])
    done = subprocess.run(
        [sys.executable, "-m", "sglang_nvfp4_patches", "verify"],
        env=_env(PYTHONPATH=path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == EXIT_ENVIRONMENT, done.stdout + done.stderr
    *checks, last = done.stdout.splitlines()
    assert len(checks) == len(PATCHES), checks
    assert all(line.startswith("NOT RUN  ") for line in checks), checks
    assert all(
        f"checks: SGLang cannot be imported here: importing {broken}/__init__.py failed with "
        "ImportError: half-installed" in line
        for line in checks
    )
    assert last.startswith(
        f"verify: 0 held, 0 failed, 0 not applicable, {len(PATCHES)} could not run on "
    )
    assert "not imported" in last and "FAILED" not in done.stdout


def _children(marker: str) -> list[int]:
    """Processes of the check module whose command line names ``marker``."""
    return [pid for pid, _ in processes_naming(CHILD_MODULE, marker)]


def test_a_stop_request_stops_the_check_processes_and_leaves_no_temporary_file(
    tmp_path: Path,
) -> None:
    """Once both children (1.6 GB each) ran on under PID 1 and nvfp4-verify-* stayed; once a
    script's ``verify & ... kill $pid`` ran on to the end (SIGINT is ignored there); once the
    empty ``$TMPDIR/$USER/cutlass_python_cache`` the children's CuTe DSL import makes stayed."""
    proc = ScriptJob(
        [sys.executable, "-m", "sglang_nvfp4_patches", "verify"],
        env=_env(TMPDIR=str(tmp_path)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not any(tmp_path.rglob("cutlass_python_cache")):
            time.sleep(0.1)
        assert _children(str(tmp_path)) and list(tmp_path.glob("nvfp4-verify-*"))
        assert proc.sigint_ignored()
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid in _children(str(tmp_path)):
            os.kill(pid, signal.SIGKILL)
    assert proc.returncode == EXIT_INTERRUPTED, stderr
    assert stderr.splitlines() == ["interrupted"]
    assert _children(str(tmp_path)) == [] and list(tmp_path.iterdir()) == []
