"""Every output README.md and docs/*.md quote (``console`` blocks, support.doc_blocks), run as
quoted on the installed SGLang and matched line by line, numbers and ``...`` aside. A changed
message fails here instead of leaving the README wrong. Blocks quoted from the simulated next
release are run by test_next_release.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.doc_blocks import REPO, Example, problem_with, quoted
from support.forkserver import run_cli, run_cli_once

PROGRAM = "sglang-nvfp4-patches"
DEMO = "scripts/demo_accuracy_ab.py"


def run(example: Example, workdir: Path) -> subprocess.CompletedProcess[str]:
    """The quoted command as an operator types it: our console script (in a process forked
    after ``import sglang``), or this repository's demo script, in a fresh directory."""
    program, *arguments = example.argv
    if program == PROGRAM and arguments[:1] in (["verify"], ["explain"]):
        # commands that only read: test_third_patch.py reads verify, test_explain.py the
        # README's explain table
        return run_cli_once(*arguments, **example.env)
    if program == PROGRAM:
        return run_cli(*arguments, **example.env)
    if program.endswith("python") and arguments[:1] == [DEMO]:
        env = {**os.environ, **example.env, "PYTHONPATH": os.pathsep.join(sys.path)}
        command = [sys.executable, str(REPO / DEMO), *arguments[1:]]
        return subprocess.run(
            command, cwd=workdir, env=env, capture_output=True, text=True, timeout=120
        )
    raise AssertionError(f"{example.where}: this test does not know how to run {program!r}")


@pytest.mark.parametrize("example", quoted("installed"), ids=lambda e: e.where)
def test_a_quoted_output_is_what_the_command_prints(example: Example, tmp_path: Path) -> None:
    done = run(example, tmp_path)
    problem = problem_with(example, done.returncode, done.stdout)
    assert problem is None, f"{problem}\n--- stderr:\n{done.stderr[-2000:]}"
