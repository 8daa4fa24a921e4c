"""``accuracy ab`` end to end: real subprocesses on 127.0.0.1, the test launcher standing in
for ``python -m sglang.launch_server`` (``accuracy_support.fake_server`` run as a program)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from accuracy_support import PYTHON_DIR
from accuracy_support.dataset_writer import WrittenQuestion, write_dataset
from accuracy_support.fake_server import fake_model_is_right
from accuracy_support.processes import processes_naming
from accuracy_support.script_job import ScriptJob, ignores_sigint
from sglang_nvfp4_patches.cli import main

SIZES = {"anatomy": 30, "virology": 30}
A_ARGS = "--attention-backend triton"
B_ARGS = "--attention-backend trtllm_mha"
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PYTHON_DIR), *sys.path])}


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[tuple[Path, Path, dict[str, WrittenQuestion]]]:
    """An MMLU csv folder and the fake model: a JSON answer key named by --model-path.

    Every process naming the key (``ab``, its servers, their SIGINT-ignoring workers) is
    killed when the test ends, so a failing assertion leaves nothing running."""
    questions = write_dataset(tmp_path / "mmlu", SIZES)
    key = tmp_path / "fake-model.json"
    key.write_text(json.dumps({qid: q.answer for qid, q in questions.items()}))
    yield tmp_path / "mmlu", key, questions
    for survivor in _survivors(key):
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(survivor.split(":")[0]), signal.SIGKILL)


def _command(data: Path, key: Path, out: Path, *extra: str, launcher: str = "") -> list[str]:
    return [
        *(sys.executable, "-m", "sglang_nvfp4_patches", "accuracy", "ab"),
        *("--model-path", str(key), "--data", str(data), "--out-dir", str(out)),
        *("--a-args", A_ARGS, "--b-args", B_ARGS),
        *("--launcher", f"{sys.executable} -m accuracy_support.fake_server {launcher}"),
        *("--parallel", "4", "--startup-timeout", "30", "--stop-grace", "1", "--backoff", "0"),
        *extra,
    ]


def _ab(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, env=ENV, capture_output=True, text=True, timeout=120)


def _survivors(marker: Path) -> list[str]:
    """Processes whose command line names ``marker`` (the fake model): servers and workers."""
    return [f"{pid}: {cmdline}" for pid, cmdline in processes_naming(str(marker))]


def _servers(marker: Path) -> list[int]:
    """The fake servers' pids (ab's command line and the script's bash name the launcher too)."""
    return [
        pid
        for pid, command in processes_naming(str(marker), "accuracy_support.fake_server")
        if "sglang_nvfp4_patches" not in command
    ]


def _workers(marker: Path) -> list[int]:
    """The pids of the servers' ``--stuck-child`` workers, once they run their own program."""
    return [pid for pid, _ in processes_naming(str(marker), "signal.SIG_IGN")]


def _expected_right(questions: dict[str, WrittenQuestion], backend: str) -> set[str]:
    return {qid for qid in questions if fake_model_is_right(qid, backend, "trtllm_mha")}


def test_b_worse_exits_1_then_rerun_starts_no_server(
    setup: tuple[Path, Path, dict[str, WrittenQuestion]], tmp_path: Path
) -> None:
    data, key, questions = setup
    out = tmp_path / "ab"
    command = _command(data, key, out, launcher="--degrade trtllm_mha")
    result = _ab(*command)
    assert result.returncode == 1, result.stderr
    assert "B is significantly worse than A" in result.stdout
    assert "Traceback" not in result.stderr
    for side, backend, args in (("A", "triton", A_ARGS), ("B", "trtllm_mha", B_ARGS)):
        run = json.loads((out / f"{side}.json").read_text())
        launcher = command[command.index("--launcher") + 1]
        assert run["server"] == {"model_path": str(key), "args": args, "launcher": launcher}
        assert run["complete"] is True and run["n_answered"] == len(questions)
        right = {r["id"] for r in run["records"] if r["correct"]}
        assert right == _expected_right(questions, backend)
        assert f"backend {backend}" in (out / f"{side}.server.log").read_text()
        assert f"side {side}: server ready after" in result.stderr
    a_right, b_right = (
        _expected_right(questions, "triton"),
        _expected_right(questions, "trtllm_mha"),
    )
    b, c = len(a_right - b_right), len(b_right - a_right)
    assert (b, c) != (0, 0)
    assert f"discordant pairs: b = {b} (A right, B wrong), c = {c}" in result.stdout
    assert _survivors(key) == []

    # Both sides are finished: the rerun starts no server and prints the same verdict as JSON.
    before = {side: (out / f"{side}.server.log").stat().st_mtime_ns for side in "AB"}
    rerun = _ab(*command, "--json")
    assert rerun.returncode == 1, rerun.stderr
    verdict = json.loads(rerun.stdout)
    assert (verdict["file_a"], verdict["file_b"]) == (str(out / "A.json"), str(out / "B.json"))
    assert (verdict["b"], verdict["c"], verdict["n"]) == (b, c, len(questions))
    assert verdict["verdict"].startswith("B is significantly worse than A")
    assert rerun.stderr.count("server not started") == 2
    assert {side: (out / f"{side}.server.log").stat().st_mtime_ns for side in "AB"} == before


def test_b_not_worse_exits_0(
    setup: tuple[Path, Path, dict[str, WrittenQuestion]], tmp_path: Path
) -> None:
    data, key, _ = setup
    result = _ab(*_command(data, key, tmp_path / "ab", launcher="--degrade flashinfer"))
    assert result.returncode == 0, result.stderr
    assert "no significant difference between A and B" in result.stdout
    assert _survivors(key) == []


def test_server_that_exits_at_start_exits_3_with_log_tail(
    setup: tuple[Path, Path, dict[str, WrittenQuestion]], tmp_path: Path
) -> None:
    data, key, _ = setup
    out = tmp_path / "ab"
    result = _ab(*_command(data, key, out, launcher="--exit-at-start"))
    assert result.returncode == 3, result.stderr
    assert "error: side A: the server exited with code 1 before /health answered" in result.stderr
    assert f"last 2 line(s) of {out / 'A.server.log'}:" in result.stderr
    assert "  fake server: scripted start failure" in result.stderr
    assert "Traceback" not in result.stderr
    assert "scripted start failure" in (out / "A.server.log").read_text()
    assert not (out / "B.server.log").exists()
    assert _survivors(key) == []


def test_side_with_unanswered_questions_exits_3(
    setup: tuple[Path, Path, dict[str, WrittenQuestion]], tmp_path: Path
) -> None:
    data, key, _ = setup
    answers = json.loads(key.read_text())
    del answers["virology/3"]  # the fake model rejects a question it has no answer for
    key.write_text(json.dumps(answers))
    out = tmp_path / "ab"
    result = _ab(*_command(data, key, out, "--max-retries", "0"))
    assert result.returncode == 3, result.stderr
    assert "error: side A: the server did not answer every question:" in result.stderr
    assert "first: virology/3: HTTP 400" in result.stderr
    assert f"last 3 line(s) of {out / 'A.server.log'}:" in result.stderr
    run_a = json.loads((out / "A.json").read_text())
    assert run_a["failed_ids"] == ["virology/3"] and run_a["complete"] is False
    assert not (out / "B.server.log").exists()
    assert _survivors(key) == []


def test_server_never_healthy_times_out_exit_3(
    setup: tuple[Path, Path, dict[str, WrittenQuestion]], tmp_path: Path
) -> None:
    data, key, _ = setup
    out = tmp_path / "ab"
    command = _command(data, key, out, "--startup-timeout", "2", launcher="--never-healthy")
    result = _ab(*command)
    assert result.returncode == 3, result.stderr
    assert "did not answer 200 within 2 s (--startup-timeout)" in result.stderr
    assert "  fake server: listening on 127.0.0.1:" in result.stderr  # the log tail
    assert _survivors(key) == []


def test_ctrl_c_during_b_then_rerun_resumes_b_only(
    setup: tuple[Path, Path, dict[str, WrittenQuestion]], tmp_path: Path
) -> None:
    data, key, questions = setup
    out = tmp_path / "ab"
    # The workers of B's server ignore SIGINT, as a wedged SGLang scheduler might.
    slow = _command(data, key, out, launcher="--degrade trtllm_mha --delay 0.05 --stuck-child")
    # A session of its own, like a shell job: Ctrl-C goes to ab's whole process group.
    proc = subprocess.Popen(
        slow, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    partial_b = out / "B.json.partial.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if partial_b.exists() and partial_b.read_bytes().count(b"\n") > 8:
            break
        time.sleep(0.01)
    running = _survivors(key)
    assert len(running) == 3, running  # ab, B's server and its worker
    os.killpg(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    lines = stderr.decode().splitlines()
    assert "Traceback" not in stderr.decode()
    assert [line for line in lines if "interrupt" in line] == [lines[-1]]
    assert lines[-1].startswith("interrupted; servers stopped; answers so far are kept in")
    assert stdout == b""
    assert _survivors(key) == []
    assert (out / "A.json").exists() and not (out / "B.json").exists()
    saved_b = partial_b.read_bytes().count(b"\n") - 1  # minus the header line

    result = _ab(*slow)  # the same launcher: a resume with another one is refused
    assert result.returncode == 1, result.stderr
    assert f"side A: {out / 'A.json'} already answers all" in result.stderr
    assert "side B: server ready after" in result.stderr
    run_b = json.loads((out / "B.json").read_text())
    assert run_b["resumed"] >= saved_b > 0
    assert run_b["resumed"] + run_b["answered_this_run"] == len(questions)
    assert _survivors(key) == []


def test_sigterm_while_waiting_for_health_stops_the_server_group(
    setup: tuple[Path, Path, dict[str, WrittenQuestion]], tmp_path: Path
) -> None:
    data, key, _ = setup
    out = tmp_path / "ab"
    command = _command(data, key, out, launcher="--never-healthy --stuck-child")
    # A script's `ab ... & ...; kill $pid`: SIGINT is ignored there, SIGTERM must still stop.
    proc = ScriptJob(command, env=ENV, stderr=subprocess.PIPE, text=True)
    # The script's bash, ab, the server and its worker. Between its fork and its exec the
    # worker still has the server's command line, so wait for the worker's own one too.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (
        len(_survivors(key)) == 4 and len(_servers(key)) == 1 and _workers(key)
    ):
        time.sleep(0.01)
    assert proc.sigint_ignored()
    # ... while the server, in a session of its own, still takes the SIGINT that stops it.
    (server,) = _servers(key)
    assert not ignores_sigint(server)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr
    assert stderr.splitlines()[-1].startswith("interrupted; servers stopped")
    assert _survivors(key) == []


@pytest.mark.parametrize("change", ["flags", "launcher"])
def test_changed_flags_or_launcher_on_resume_are_refused(
    setup: tuple[Path, Path, dict[str, WrittenQuestion]], tmp_path: Path, change: str
) -> None:
    data, key, _ = setup
    out = tmp_path / "ab"
    small = ("--subjects", "anatomy", "--limit", "3")
    assert _ab(*_command(data, key, out, *small)).returncode == 0
    runs = {side: (out / f"{side}.json").read_text() for side in "AB"}
    command = _command(data, key, out, *small, launcher="--degrade trtllm_mha")
    says = "server.launcher: stored '"
    if change == "flags":
        command = _command(data, key, out, *small)
        command[command.index(A_ARGS)] = "--attention-backend flashinfer"
        says = "server.args: stored '--attention-backend triton', now '--attention-backend flash"
    result = _ab(*command)
    assert result.returncode == 2, result.stderr
    (error,) = result.stderr.splitlines()
    assert error.startswith(f"error: side A: {out / 'A.json'} holds answers from a run with")
    assert says in error and "mix two configurations" in error
    assert {side: (out / f"{side}.json").read_text() for side in "AB"} == runs
    assert _survivors(key) == []


@pytest.mark.parametrize("where", ["file", "under-file", "not-writable"])
def test_an_unusable_out_dir_is_one_line_before_any_server(
    setup: tuple[Path, Path, dict[str, WrittenQuestion]], tmp_path: Path, where: str
) -> None:
    data, key, _ = setup
    blocker = tmp_path / "a-file"
    blocker.write_text("keep me")
    out, says = {
        "file": (blocker, "is an existing file, not a directory"),
        "under-file": (blocker / "ab", f"lies under {blocker}, which is a file"),
        # /sys refuses new entries even to root (EPERM), as a read-only mount would
        "not-writable": (Path("/sys/sglang-nvfp4-ab-test"), "cannot write there"),
    }[where]
    result = _ab(*_command(data, key, out))
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [result.stderr.strip()]
    assert result.stderr.startswith(f"error: --out-dir {out}: ") and says in result.stderr
    assert "side A" not in result.stderr and blocker.read_text() == "keep me"
    assert _survivors(key) == []


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--b-args", "--port 1"], "--port is set by ab itself"),
        (["--b-args", "--port"], "--port is set by ab itself"),  # one flag, typed as usual
        (["--a-args=--host=0.0.0.0"], "--host is set by ab itself"),
        (["--a-args", "'unclosed"], "cannot split"),
        (["--launcher", ""], "is empty"),
    ],
)
def test_bad_ab_arguments_exit_2(
    argv: list[str], fragment: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        main(["accuracy", "ab", "--model-path", "m", "--data", "d", *argv])
    assert info.value.code == 2
    assert fragment in capsys.readouterr().err


def test_launcher_that_cannot_run_is_bad_input(
    setup: tuple[Path, Path, dict[str, WrittenQuestion]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    data, key, _ = setup
    argv = [
        *("accuracy", "ab", "--model-path", str(key), "--data", str(data)),
        *("--out-dir", str(tmp_path)),
    ]
    assert main([*argv, "--launcher", str(tmp_path / "no-such-launcher")]) == 2
    assert "cannot run the server command" in capsys.readouterr().err


def test_a_smaller_limit_compares_stored_answers_and_deletes_none(
    setup: tuple[Path, Path, dict[str, WrittenQuestion]], tmp_path: Path
) -> None:
    data, key, questions = setup
    out = tmp_path / "ab"
    degrade = "--degrade trtllm_mha"
    assert _ab(*_command(data, key, out, "--limit", "4", launcher=degrade)).returncode == 0
    runs = {side: (out / f"{side}.json").read_bytes() for side in "AB"}
    logs = {side: (out / f"{side}.server.log").stat().st_mtime_ns for side in "AB"}
    result = _ab(*_command(data, key, out, "--limit", "2", "--json", launcher=degrade))
    assert result.returncode == 0, result.stderr  # 4 questions: nothing is significant
    assert {side: (out / f"{side}.json").read_bytes() for side in "AB"} == runs
    assert {side: (out / f"{side}.server.log").stat().st_mtime_ns for side in "AB"} == logs
    assert result.stderr.count("server not started") == 2
    for side in "AB":
        assert (
            f"side {side}: NOTE: {out / f'{side}.json'} holds 8 stored answers; this run "
            "(--limit: stored 4, now 2) asks 4 of them" in result.stderr
        )
    verdict = json.loads(result.stdout)
    subset = {qid for qid, q in questions.items() if q.index < 2}
    a_right = subset & _expected_right(questions, "triton")
    b_right = subset & _expected_right(questions, "trtllm_mha")
    assert verdict["n"] == len(subset) == 4
    assert (verdict["b"], verdict["c"]) == (len(a_right - b_right), len(b_right - a_right))


def test_a_second_ab_on_the_same_out_dir_is_refused_before_any_server(
    setup: tuple[Path, Path, dict[str, WrittenQuestion]], tmp_path: Path
) -> None:
    from sglang_nvfp4_patches.accuracy.store import run_file_lock

    data, key, _ = setup
    out = tmp_path / "ab"
    with run_file_lock(out / "B.json", "--out-dir"):  # as a running ab holds it
        result = _ab(*_command(data, key, out))
    assert result.returncode == 2, result.stderr
    assert result.stderr == (
        f"error: --out-dir {out / 'B.json'}: process {os.getpid()} is writing this run right "
        f"now (it holds {out / '.B.json.lock'}); wait for it to end, or pick another --out-dir\n"
    )
    assert not (out / "A.server.log").exists() and _survivors(key) == []


def test_a_restarted_server_keeps_its_earlier_log(tmp_path: Path) -> None:
    """Once a resumed ``ab`` overwrote A.server.log and B.server.log; the tail shown after a
    failure is the last start's."""
    from sglang_nvfp4_patches.accuracy.ab import ServerProcess, log_tail

    log = tmp_path / "A.server.log"
    for run in ("first", "second"):
        command = [sys.executable, "-c", f"print('{run} start')"]
        with ServerProcess.running(command, 1, log, grace_s=1) as server:
            server.proc.wait(timeout=30)
    text = log.read_text().splitlines()
    assert text[1::2] == ["first start", "second start"]
    assert all(": accuracy ab starts " in line for line in text[0::2]) and len(text) == 4
    assert log_tail(log) == ["second start"]
