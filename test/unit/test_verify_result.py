"""``verify``'s outcomes and lines (no SGLang import)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from accuracy_support.processes import is_running
from sglang_nvfp4_patches.check_result import (
    CheckFailed,
    CheckResult,
    NotApplicable,
    Outcome,
    run_check,
)
from sglang_nvfp4_patches.errors import EXIT_ENVIRONMENT, EXIT_FAILED, EXIT_OK
from sglang_nvfp4_patches.verify import run as verify_run
from sglang_nvfp4_patches.verify.run import child_environment, exit_status, sglang_line, summary

_T = TypeVar("_T")


def _raises(error: Exception) -> str:
    raise error


def test_a_check_holds_fails_or_has_nothing_to_exercise() -> None:
    assert run_check("p", "c", lambda: "fine") == CheckResult("p", "c", Outcome.HELD, "fine")
    failed = run_check("p", "c", lambda: _raises(CheckFailed("wrong")))
    assert failed == CheckResult("p", "c", Outcome.FAILED, "wrong")
    na = run_check("p", "c", lambda: _raises(NotApplicable("nothing here")))
    assert na == CheckResult("p", "c", Outcome.NOT_APPLICABLE, "nothing here")


def _divide(by: int) -> float:
    return 1 / by


def test_an_unexpected_error_is_a_failure_naming_where_it_arose() -> None:
    """The innermost frame is named: here ``_divide``'s line, two calls below the check."""

    def broken() -> str:
        return str(_divide(0))

    result = run_check("p", "c", broken)
    line = _divide.__code__.co_firstlineno + 1
    assert result == CheckResult(
        "p", "c", Outcome.FAILED, f"ZeroDivisionError: division by zero (at {__file__}:{line})"
    )


def test_a_result_survives_json_and_reads_as_one_line() -> None:
    result = CheckResult("gemma4-attention", "verdict", Outcome.FAILED, "why")
    written = json.loads(json.dumps(result.as_dict()))
    assert written == {
        "patch": "gemma4-attention",
        "check": "verdict",
        "outcome": "FAILED",
        "reason": "why",
    }
    assert CheckResult.from_dict(written) == result
    assert result.line() == "FAILED  gemma4-attention: verdict: why"


def test_the_summary_counts_each_outcome_and_names_the_release() -> None:
    results = [
        CheckResult("p", "a", Outcome.HELD, ""),
        CheckResult("p", "b", Outcome.HELD, ""),
        CheckResult("p", "c", Outcome.FAILED, ""),
        CheckResult("p", "d", Outcome.NOT_APPLICABLE, ""),
    ]
    text = summary(results, "0.5.24.dev0", 12.4)
    assert text.startswith("verify: 2 held, 1 failed, 1 not applicable on SGLang 0.5.24.dev0")
    assert "untested: SGLang 0.5.24.dev0 is newer" in text and "12 s" in text


def test_the_children_run_with_every_patch_on(monkeypatch) -> None:
    monkeypatch.setenv("SGLANG_NVFP4_PATCHES_DISABLE", "gemma4-attention")
    monkeypatch.setenv("SGLANG_NVFP4_PATCHES_FORCE", "gemma4-attention")
    env = child_environment()
    assert "SGLANG_NVFP4_PATCHES_DISABLE" not in env and "SGLANG_NVFP4_PATCHES_FORCE" not in env
    assert env["SGLANG_NVFP4_PATCHES_UNTESTED"] == "apply"


def test_the_sglang_imported_is_named_where_its_metadata_says_another_version() -> None:
    imported = {"version": "0.5.22", "file": "/overlay/sglang/__init__.py"}
    assert sglang_line(imported, "0.5.22") == "SGLang 0.5.22"
    assert sglang_line(imported, "0.5.23") == (
        "SGLang 0.5.22 (imported from /overlay/sglang/__init__.py; package metadata says 0.5.23)"
    )
    assert sglang_line({}, "0.5.23") == "SGLang 0.5.23 (package metadata; not imported)"
    text = summary([CheckResult("p", "c", Outcome.HELD, "")], "0.5.23", 3, imported)
    assert "on SGLang 0.5.22 (imported from /overlay" in text  # the release judged: 0.5.22's


def test_a_check_that_could_not_run_is_no_verdict_and_has_its_own_status() -> None:
    """Once "0 held, 2 failed", exit 1, on a broken install where no check ran."""
    not_run = CheckResult("p", "checks", Outcome.NOT_RUN, "SGLang cannot be imported here")
    held = CheckResult("p", "a", Outcome.HELD, "")
    failed = CheckResult("p", "b", Outcome.FAILED, "")
    assert exit_status([held, not_run]) == EXIT_ENVIRONMENT
    assert exit_status([failed, not_run]) == EXIT_FAILED  # a contract that does not hold wins
    assert exit_status([held]) == EXIT_OK
    text = summary([not_run, not_run], "0.5.23", 1)
    assert text.startswith("verify: 0 held, 0 failed, 0 not applicable, 2 could not run on ")
    assert not_run.line() == "NOT RUN  p: checks: SGLang cannot be imported here"


@pytest.mark.parametrize("where", ["making its directory", "starting a check process"])
def test_a_stop_while_verify_starts_leaves_no_process_and_no_directory(
    where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once a stop landing inside Popen left that check process running on (its $TMPDIR under
    the nvfp4-verify-* just removed) after verify exited 130; a stop inside the making of the
    temporary directory would leave the directory. Here the stop lands right after each."""
    real_popen, real_mkdtemp = subprocess.Popen, tempfile.mkdtemp
    started: list[int] = []

    def stopped_after(call: Callable[..., _T]) -> Callable[..., _T]:
        def wrapper(*args: object, **kwargs: object) -> _T:
            made = call(*args, **kwargs)
            os.kill(os.getpid(), signal.SIGINT)  # handled before the caller gets ``made``
            return made

        return wrapper

    def stand_in(command: list[str], **kwargs: object) -> subprocess.Popen[str]:
        process = real_popen([sys.executable, "-c", "import time; time.sleep(120)"], **kwargs)  # type: ignore[call-overload]
        started.append(process.pid)
        return process

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    if where == "making its directory":
        monkeypatch.setattr(tempfile, "mkdtemp", stopped_after(real_mkdtemp))
        monkeypatch.setattr(subprocess, "Popen", stand_in)
    else:
        monkeypatch.setattr(subprocess, "Popen", stopped_after(stand_in))
    try:
        with pytest.raises(KeyboardInterrupt):
            verify_run.run_all()
    finally:
        running = [pid for pid in started if is_running(pid)]
        for pid in running:
            os.kill(pid, signal.SIGKILL)
    assert running == [] and list(tmp_path.iterdir()) == []
    assert started or where == "making its directory"
