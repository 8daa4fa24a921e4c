"""The suite's guard against temporary files left behind (``support/temp_guard.py``), in a
pytest session of its own whose tests leave such files, or leave none."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from accuracy_support import PYTHON_DIR

TESTS = """import os, tempfile

def test_keeps_things_tidy():
    os.rmdir(tempfile.mkdtemp(prefix="nvfp4-verify-"))
    with tempfile.TemporaryDirectory(prefix="sglang-nvfp4-patches-"):
        pass
"""
LEAKING = """
def test_leaves_a_traceback_file():
    tempfile.mkstemp(prefix="sglang-nvfp4-patches-internal-error-", suffix=".txt")

def test_leaves_a_folder_of_a_child():
    os.makedirs(os.path.join(os.environ["TMPDIR"], "nvfp4-verify-x", "tmp"))

def test_leaves_a_file_of_someone_else():
    tempfile.mkstemp(prefix="other-")
"""


@pytest.mark.parametrize("leaks", [False, True])
def test_files_of_ours_left_in_the_temporary_directory_fail_the_session(
    tmp_path: Path, leaks: bool
) -> None:
    (tmp_path / "test_planted.py").write_text(TESTS + (LEAKING if leaks else ""))
    outside = tmp_path / "tmp"  # the user's temporary directory
    outside.mkdir()
    env = {
        **os.environ,
        "TMPDIR": str(outside),
        "PYTHONPATH": str(PYTHON_DIR.parent / "test"),
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",  # a start 5x as fast: none is needed
    }
    pytest_command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    done = subprocess.run(
        [*pytest_command, "-p", "support.temp_guard"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert list(outside.iterdir()) == []  # the session's own directory went, with them
    if not leaks:
        assert done.returncode == 0 and "left behind" not in done.stdout, done.stdout
        return
    assert done.returncode == 1 and "4 passed" in done.stdout, done.stdout
    said = done.stdout[done.stdout.index("temporary files left behind") :].splitlines()
    assert said[1].startswith("the tests left 2 temporary file(s) of sglang-nvfp4-patches in ")
    assert said[1].split(" in ")[1].startswith(f"{outside}/suite-tmp-")
    assert said[2] == "  nvfp4-verify-x"
    assert said[3].startswith("  sglang-nvfp4-patches-internal-error-") and said[3].endswith(".txt")
    assert "other-" not in done.stdout  # not ours: not named
