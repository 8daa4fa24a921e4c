"""``accuracy run`` end to end against the scripted fake server (no SGLang, no GPU)."""

from __future__ import annotations

import contextlib
import gc
import json
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from accuracy_support import PYTHON_DIR
from accuracy_support.dataset_writer import (
    WrittenQuestion,
    write_dataset,
    wrong_letter,
)
from accuracy_support.fake_server import FakeServer, Script
from accuracy_support.script_job import ScriptJob
from sglang_nvfp4_patches.cli import main
from sglang_nvfp4_patches.errors import EXIT_ENVIRONMENT, EXIT_SERVER

SIZES = {"abstract_algebra": 12, "anatomy": 9, "world_religions": 7}


def _scripted(questions: dict[str, WrittenQuestion]) -> tuple[dict[str, str], set[str]]:
    """Replies: every third question right, some wrong, some unparseable. Returns the replies
    and the ids the server answers correctly."""
    replies: dict[str, str] = {}
    correct: set[str] = set()
    for q in questions.values():
        if q.index % 3 == 0:
            replies[q.qid] = f" {q.answer}"
            correct.add(q.qid)
        elif q.index % 3 == 1:
            replies[q.qid] = f" {wrong_letter(q.answer)}."
        else:
            replies[q.qid] = " I think"
    return replies, correct


@pytest.fixture
def dataset(tmp_path: Path) -> tuple[Path, dict[str, WrittenQuestion]]:
    root = tmp_path / "mmlu"
    return root, write_dataset(root, SIZES)


@pytest.fixture
def server(dataset: tuple[Path, dict[str, WrittenQuestion]]) -> Iterator[FakeServer]:
    replies, _ = _scripted(dataset[1])
    with FakeServer(Script(replies=replies, model="gemma")) as srv:
        yield srv


@dataclass(frozen=True)
class Case:
    """The dataset, its scripted server and the run file of one test."""

    data: Path
    questions: dict[str, WrittenQuestion]
    server: FakeServer
    out: Path

    @property
    def partial(self) -> Path:
        return self.out.with_name(self.out.name + ".partial.jsonl")

    def run(self, *extra: str) -> int:
        return _run(self.server, self.data, self.out, *extra)


@pytest.fixture
def case(
    dataset: tuple[Path, dict[str, WrittenQuestion]], server: FakeServer, tmp_path: Path
) -> Case:
    return Case(dataset[0], dataset[1], server, tmp_path / "run.json")


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes the test starts: any still running when it ends, pass or fail, is killed."""
    processes: list[subprocess.Popen[bytes]] = []
    yield processes
    for proc in processes:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def _run(server: FakeServer, data: Path, out: Path, *extra: str) -> int:
    argv = ["accuracy", "run", "--base-url", server.url, "--data", str(data), "--out", str(out)]
    return main([*argv, "--parallel", "4", "--backoff", "0.01", "--no-progress", *extra])


def _load(out: Path) -> dict:
    return json.loads(out.read_text(encoding="utf-8"))


@pytest.mark.parametrize("api", ["native", "openai"])
def test_accuracy_matches_script(
    api: str,
    dataset: tuple[Path, dict[str, WrittenQuestion]],
    server: FakeServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    data, questions = dataset
    _, correct = _scripted(questions)
    out = tmp_path / "run.json"
    code = _run(server, data, out, "--api", api, "--model", "gemma")
    stdout = capsys.readouterr().out
    assert code == 0
    assert server.bad_requests == []
    run = _load(out)
    assert run["api"] == api and run["shots"] == 5 and run["base_url"] == server.url
    assert run["complete"] is True
    assert sorted(r["id"] for r in run["records"]) == sorted(questions)
    for record in run["records"]:
        q = questions[record["id"]]
        assert record["subject"] == q.subject
        assert record["answer"] == q.answer
        assert record["correct"] is (record["id"] in correct)
    for subject, n in SIZES.items():
        expected = sum(1 for qid in correct if qid.startswith(f"{subject}/")) / n
        assert run["per_subject"][subject]["accuracy"] == pytest.approx(expected)
        assert run["per_subject"][subject]["n"] == n
    total = len(correct) / len(questions)
    assert run["accuracy"] == pytest.approx(total)
    total_line = rf"^TOTAL +{len(questions)} +{len(correct)} +{total:.4f}$"
    assert re.search(total_line, stdout, re.MULTILINE), stdout
    assert "questions/s" in stdout
    assert "WARNING" not in stdout  # 10/28 = 0.357 > 0.30
    assert not (tmp_path / "run.json.partial.jsonl").exists()
    # Each question was asked exactly once, with its own 5-shot prompt.
    assert set(server.calls.values()) == {1}
    prompt = server.prompts["anatomy/4"]
    assert prompt.startswith(
        "The following are multiple choice questions (with answers) about anatomy.\n\n"
    )
    assert prompt.endswith(
        f"{questions['anatomy/4'].question}\nA. alpha 4\nB. beta, 4\n"
        f'C. "gamma" 4\nD. delta 4\nAnswer:'
    )
    assert prompt.count("\nAnswer: ") == 5


def test_collapse_warning(
    dataset: tuple[Path, dict[str, WrittenQuestion]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    data, questions = dataset
    # 8 of 28 right = 0.2857 <= 0.30: collapsed.
    right = set(sorted(questions)[:8])
    replies = {
        qid: f" {q.answer if qid in right else wrong_letter(q.answer)}"
        for qid, q in questions.items()
    }
    with FakeServer(Script(replies=replies)) as srv:
        code = _run(srv, data, tmp_path / "run.json")
    captured = capsys.readouterr()
    assert code == 0
    assert _load(tmp_path / "run.json")["accuracy"] == pytest.approx(8 / 28)
    assert "WARNING: accuracy 0.2857 is at or below chance" in captured.err
    assert "WARNING" not in captured.out and "TOTAL" in captured.out


def test_retries_recover_from_503_and_dropped_connections(
    dataset: tuple[Path, dict[str, WrittenQuestion]], server: FakeServer, tmp_path: Path
) -> None:
    data, questions = dataset
    flaky_503 = {"abstract_algebra/1": 3, "anatomy/2": 1}
    dropped = {"anatomy/0": 2, "world_religions/6": 3}
    server.script.fail_503 = flaky_503
    server.script.drop = dropped
    out = tmp_path / "run.json"
    assert _run(server, data, out, "--max-retries", "3") == 0
    assert len(_load(out)["records"]) == len(questions)
    for qid, failures in {**flaky_503, **dropped}.items():
        assert server.calls[qid] == failures + 1
        assert server.answered[qid] == 1


def test_timeout_is_retried(
    dataset: tuple[Path, dict[str, WrittenQuestion]], server: FakeServer, tmp_path: Path
) -> None:
    data, questions = dataset
    server.script.slow = {"anatomy/3": (1, 3.0)}  # first call answers after 3 s
    out = tmp_path / "run.json"
    assert _run(server, data, out, "--timeout", "0.3") == 0
    assert server.calls["anatomy/3"] == 2
    assert len(_load(out)["records"]) == len(questions)


def test_exhausted_retries_are_reported_then_rerun_asks_only_those(
    dataset: tuple[Path, dict[str, WrittenQuestion]],
    server: FakeServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    data, questions = dataset
    server.script.slow = {"anatomy/5": (99, 3.0)}
    server.script.fail_503 = {"world_religions/2": 99}
    out = tmp_path / "run.json"
    assert _run(server, data, out, "--timeout", "0.2", "--max-retries", "1") == EXIT_SERVER
    stderr = capsys.readouterr().err
    assert "ERROR: 2 question(s) failed and were not recorded; first: " in stderr
    assert "timed out after 0.2 s" in stderr or "HTTP 503" in stderr
    run = _load(out)
    assert run["complete"] is False and run["n_failed"] == 2
    assert sorted(run["failed_ids"]) == ["anatomy/5", "world_religions/2"]
    recorded = {r["id"] for r in run["records"]}
    assert recorded == set(questions) - {"anatomy/5", "world_religions/2"}
    assert server.calls["anatomy/5"] == 2 and server.calls["world_religions/2"] == 2

    # A torn last line, as left by a kill in the middle of a write, must not break a resume.
    partial = tmp_path / "run.json.partial.jsonl"
    with partial.open("a", encoding="utf-8") as handle:
        handle.write('{"id": "anatomy/5", "subj')
    server.script.slow = {}
    server.script.fail_503 = {}
    before = server.snapshot_calls()
    assert _run(server, data, out) == 0
    asked_again = server.snapshot_calls() - before
    assert asked_again == {"anatomy/5": 1, "world_religions/2": 1}
    run = _load(out)
    ids = [r["id"] for r in run["records"]]
    assert len(ids) == len(set(ids)) == len(questions)
    assert run["complete"] is True and run["n_failed"] == 0
    assert not partial.exists()


def test_client_error_is_not_retried(
    dataset: tuple[Path, dict[str, WrittenQuestion]],
    server: FakeServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    data, _ = dataset
    server.script.reject = {"anatomy/1": 422}
    assert _run(server, data, tmp_path / "run.json") == EXIT_SERVER
    assert server.calls["anatomy/1"] == 1
    assert "anatomy/1: HTTP 422" in capsys.readouterr().err


def test_wrong_model_name_fails_fast_and_clearly(
    dataset: tuple[Path, dict[str, WrittenQuestion]],
    server: FakeServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    data, questions = dataset
    code = _run(server, data, tmp_path / "run.json", "--api", "openai", "--model", "other")
    stderr = capsys.readouterr().err
    assert code == EXIT_SERVER
    assert "HTTP 400" in stderr and "not retried" in stderr
    assert sum(server.calls.values()) == 0  # the server rejected the body before counting
    assert len(server.bad_requests) == len(questions)


def test_unreachable_server_stops_early(
    dataset: tuple[Path, dict[str, WrittenQuestion]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    data = dataset[0]
    root = data.parent / "big"
    write_dataset(root, {"s": 200})
    with FakeServer(Script(replies={})) as srv:
        url = srv.url  # the port is closed once the server stops
    code = main(
        [
            *("accuracy", "run", "--base-url", url),
            *("--data", str(root), "--out", str(tmp_path / "r.json")),
            *("--parallel", "2", "--max-retries", "1", "--backoff", "0", "--no-progress"),
        ]
    )
    captured = capsys.readouterr()
    assert code == EXIT_SERVER
    # Errors go to stderr, and no empty results table goes to stdout.
    assert captured.out == ""
    first = captured.err.splitlines()[0]
    assert first.startswith("ERROR: ") and "question(s) failed" in first
    assert "ClientConnectorError" in first
    assert "stopped after" in captured.err and "not attempted" in captured.err
    said = "no answer was received, so none is kept; rerun to ask the rest"
    assert captured.err.splitlines()[-1] == said
    # Once r.json (no record) and r.json.partial.jsonl (a header) stayed as that line was said.
    assert sorted(path.name for path in tmp_path.iterdir()) == ["big", "mmlu"]


@pytest.mark.parametrize("existed", ["partial file", "run file"])
def test_a_file_there_before_a_run_without_answers_stays(
    existed: str, dataset: tuple[Path, dict[str, WrittenQuestion]], tmp_path: Path
) -> None:
    """What the run did not make stays, though it holds no answer (written by hand here, as
    an earlier run with other settings would leave it)."""
    out = tmp_path / "r.json"
    head = {"format": "sglang-nvfp4-patches/accuracy-run", "version": 1, "shots": 0}
    if existed == "partial file":
        there = partial_path_of(out)
        there.write_text(json.dumps({**head, "format": head["format"] + "/partial"}) + "\n")
    else:
        there = out
        there.write_text(json.dumps({**head, "records": []}))
    with FakeServer(Script(replies={})) as srv:
        url = srv.url  # the port is closed once the server stops
    argv = ["accuracy", "run", "--base-url", url, "--data", str(dataset[0]), "--out", str(out)]
    assert main([*argv, "--max-retries", "0", "--no-progress"]) == EXIT_SERVER
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(["mmlu", there.name])


def test_a_stop_before_any_answer_leaves_no_file(
    dataset: tuple[Path, dict[str, WrittenQuestion]],
    tmp_path: Path,
    started: list[subprocess.Popen[bytes]],
) -> None:
    """Once the partial file (its header only) stayed after "none is kept"."""
    out = tmp_path / "r.json"
    with socket.socket() as silent:  # accepts, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(64)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        argv = ["accuracy", "run", "--base-url", url, "--data", str(dataset[0]), "--out", str(out)]
        argv += ["--timeout", "1", "--no-progress"]  # its model is asked for as long
        proc = _start_run(argv, partial_path_of(out), 0, started)
        assert partial_path_of(out).exists()  # the questions are being asked
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr
    assert stderr.decode().splitlines() == [
        "interrupted; no answer was received, so none is kept; rerun the same command to resume"
    ]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["mmlu"]


def test_resume_refuses_answers_from_other_settings(
    dataset: tuple[Path, dict[str, WrittenQuestion]],
    server: FakeServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    data, _ = dataset
    out = tmp_path / "run.json"
    server.script.fail_503 = {"anatomy/1": 99}
    assert _run(server, data, out, "--max-retries", "0") == EXIT_SERVER
    capsys.readouterr()
    assert _run(server, data, out, "--shots", "3") == 2
    err = capsys.readouterr().err
    assert "shots: stored 5, now 3" in err and "write to another --out" in err


def _hangup_by_default() -> None:
    """In the child before its exec: SIGHUP's default action (a SIG_IGN that nohup set would
    be inherited, and the program rightly keeps nohup's choice)."""
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def _start_run(
    argv: list[str],
    partial: Path,
    lines: int,
    started: list[subprocess.Popen[bytes]],
    script_job: bool = False,
) -> subprocess.Popen[bytes]:
    """``accuracy ARGV`` in a fresh process (``script_job``: as a script's background job,
    SIGINT ignored), returned once its partial file has more than ``lines`` lines (or the
    process ended, or 30 s passed)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PYTHON_DIR), *sys.path])}
    command = [sys.executable, "-m", "sglang_nvfp4_patches", *argv]
    if script_job:
        proc = ScriptJob(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    else:  # as from a terminal: SIGHUP's default action even where pytest runs under nohup
        proc = subprocess.Popen(
            command,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            preexec_fn=_hangup_by_default,
        )
    started.append(proc)  # type: ignore[arg-type]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.poll() is None:
        if partial.exists() and partial.read_bytes().count(b"\n") > lines:
            break
        time.sleep(0.005)
    return proc


@pytest.mark.parametrize(
    ("sig", "script_job"),
    [
        (signal.SIGKILL, False),
        (signal.SIGINT, False),
        (signal.SIGTERM, False),
        (signal.SIGTERM, True),
        (signal.SIGHUP, False),
    ],
    ids=["SIGKILL", "SIGINT", "SIGTERM", "SIGTERM-script-job", "SIGHUP"],
)
def test_resume_after_kill_loses_and_repeats_nothing(
    sig: signal.Signals,
    script_job: bool,
    dataset: tuple[Path, dict[str, WrittenQuestion]],
    tmp_path: Path,
    started: list[subprocess.Popen[bytes]],
) -> None:
    """SIGKILL: nothing can run on the way out; SIGINT: Ctrl-C, the clean path; SIGTERM (a
    job timeout): as Ctrl-C, once exit 143 without a word, and once ignored for 60 s in a
    script's background job (SIGINT ignored there); SIGHUP (a closed terminal): as Ctrl-C,
    once exit 129 without a word."""
    root = dataset[0].parent / "resume"
    questions = write_dataset(root, {"a": 40, "b": 40, "c": 40}, seed=3)
    replies = {qid: f" {q.answer}" for qid, q in questions.items()}
    out = tmp_path / "run.json"
    partial = tmp_path / "run.json.partial.jsonl"
    # 0.05 s an answer, two at a time: the signal has ~2 s to land after the 20th answer and
    # before the last, under CI's load too.
    with FakeServer(Script(replies=replies, delay_s=0.05)) as srv:
        argv = [
            *("accuracy", "run", "--base-url", srv.url, "--data", str(root), "--out", str(out)),
            *("--parallel", "2", "--no-progress"),
        ]
        proc = _start_run(argv, partial, 20, started, script_job)
        assert not script_job or proc.sigint_ignored()  # type: ignore[attr-defined]
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=10)
        if sig == signal.SIGKILL:
            assert proc.returncode == -signal.SIGKILL  # killed mid-run, not finished
        lines = partial.read_text(encoding="utf-8").split("\n")
        saved = {json.loads(line)["id"]: json.loads(line) for line in lines[1:-1]}
        if sig != signal.SIGKILL:
            assert proc.returncode == 130, stderr
            assert stderr.decode().splitlines() == [
                f"interrupted; the {len(saved)} answer(s) so far are kept in {partial}; rerun "
                "the same command to resume"
            ]
        assert not out.exists()

        assert 20 <= len(saved) < len(questions)
        before = srv.snapshot_calls()
        assert all(before[qid] == 1 for qid in saved)

        srv.script.delay_s = 0.0
        assert main([*argv, "--backoff", "0.01"]) == 0
        after = srv.snapshot_calls()

    run = _load(out)
    ids = [r["id"] for r in run["records"]]
    assert len(ids) == len(set(ids)) == len(questions)
    assert set(ids) == set(questions)
    assert run["resumed"] == len(saved) and run["accuracy"] == 1.0
    for qid in saved:
        assert after[qid] == before[qid], f"{qid} was answered before the kill but asked again"
    by_id = {r["id"]: r for r in run["records"]}
    assert all(by_id[qid] == record for qid, record in saved.items())
    assert not partial.exists()


def test_resume_refuses_when_the_answer_key_changed(
    dataset: tuple[Path, dict[str, WrittenQuestion]],
    server: FakeServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    data, questions = dataset
    out = tmp_path / "run.json"
    assert _run(server, data, out) == 0
    old = questions["anatomy/0"].answer
    new = wrong_letter(old)
    test_csv = data / "test" / "anatomy_test.csv"
    lines = test_csv.read_text(encoding="utf-8").split("\n")
    row_end = next(i for i, line in enumerate(lines) if line.endswith(f",{old}"))
    lines[row_end] = lines[row_end][:-1] + new
    test_csv.write_text("\n".join(lines), encoding="utf-8")
    capsys.readouterr()
    assert _run(server, data, out) == 2
    err = capsys.readouterr().err
    assert f"{out}: stored answer key for anatomy/0 is {old}, the data now says {new}" in err


def _first(questions: dict[str, WrittenQuestion], limit: int) -> set[str]:
    """The ids ``--limit`` keeps: the first ``limit`` rows of each subject."""
    return {qid for qid, q in questions.items() if q.index < limit}


@pytest.mark.parametrize("limit", [None, 4])
def test_a_rerun_with_every_answer_stored_asks_nothing_and_keeps_the_file(
    case: Case, capsys: pytest.CaptureFixture[str], limit: int | None
) -> None:
    """The same command again, or one with a smaller --limit: the answers are reported from
    the run file, which keeps every answer and the real run's timings and counts."""
    assert case.run() == 0
    stored = case.out.read_bytes()
    capsys.readouterr()
    before = case.server.snapshot_calls()
    assert case.run(*(["--limit", str(limit)] if limit else [])) == 0
    captured = capsys.readouterr()
    assert case.server.snapshot_calls() == before
    assert case.out.read_bytes() == stored
    asked = _first(case.questions, limit or 99)
    right = len(asked & _scripted(case.questions)[1])
    total_line = rf"^TOTAL +{len(asked)} +{right} +{right / len(asked):.4f}$"
    assert re.search(total_line, captured.out, re.MULTILINE), captured.out
    assert f"(0 asked now, {len(asked)} resumed)" in captured.out
    note = (
        f"NOTE: {case.out} holds {len(case.questions)} stored answers; this run (--limit: "
        f"stored all, now {limit}) asks {len(asked)} of them, all answered already"
    )
    assert (note in captured.err) is (limit is not None)


def test_a_smaller_limit_keeps_the_partial_answers_of_an_unfinished_run(
    case: Case, capsys: pytest.CaptureFixture[str]
) -> None:
    case.server.script.fail_503 = {"abstract_algebra/10": 99, "anatomy/8": 99}  # past --limit 4
    assert case.run("--max-retries", "0") == EXIT_SERVER
    files = (case.out.read_bytes(), case.partial.read_bytes())
    capsys.readouterr()
    assert case.run("--limit", "4") == 0
    assert (case.out.read_bytes(), case.partial.read_bytes()) == files
    assert f"holds {len(case.questions) - 2} stored answers" in capsys.readouterr().err
    # The original command still resumes with everything: only the two failures are asked.
    case.server.script.fail_503 = {}
    before = case.server.snapshot_calls()
    assert case.run() == 0
    assert case.server.snapshot_calls() - before == {"abstract_algebra/10": 1, "anatomy/8": 1}
    assert {r["id"] for r in _load(case.out)["records"]} == set(case.questions)


@pytest.mark.parametrize(
    ("options", "names"),
    [
        (["--limit", "4"], "--limit: stored all, now 4"),
        (["--subjects", "anatomy,world_religions"], "--subjects: stored abstract_algebra,"),
    ],
)
def test_a_rerun_that_would_drop_stored_answers_to_finish_is_refused(
    case: Case, capsys: pytest.CaptureFixture[str], options: list[str], names: str
) -> None:
    case.server.script.fail_503 = {"anatomy/1": 99}  # inside both narrower question sets
    assert case.run("--max-retries", "0") == EXIT_SERVER
    files = (case.out.read_bytes(), case.partial.read_bytes())
    capsys.readouterr()
    before = case.server.snapshot_calls()
    assert case.run(*options) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {case.partial} holds ") and names in err, err
    assert f"would rewrite {case.out} without those answers" in err
    assert len(err.splitlines()) == 1 and case.server.snapshot_calls() == before
    assert (case.out.read_bytes(), case.partial.read_bytes()) == files


def test_a_larger_limit_asks_only_the_new_questions(case: Case) -> None:
    assert case.run("--limit", "3") == 0
    first = {r["id"]: r for r in _load(case.out)["records"]}
    before = case.server.snapshot_calls()
    assert case.run("--limit", "6") == 0
    asked = set(case.server.snapshot_calls() - before)
    assert asked == _first(case.questions, 6) - _first(case.questions, 3)
    run = _load(case.out)
    assert {r["id"] for r in run["records"]} == _first(case.questions, 6) and run["limit"] == 6
    assert all(r == first[r["id"]] for r in run["records"] if r["id"] in first)


def test_two_runs_on_one_out_cannot_overlap(
    dataset: tuple[Path, dict[str, WrittenQuestion]],
    tmp_path: Path,
    started: list[subprocess.Popen[bytes]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The second is refused while the first holds the run file; no question is asked twice."""
    root = dataset[0].parent / "locked"
    questions = write_dataset(root, {"a": 30, "b": 30}, seed=5)
    out = tmp_path / "run.json"
    partial = tmp_path / "run.json.partial.jsonl"
    replies = {qid: f" {q.answer}" for qid, q in questions.items()}
    with FakeServer(Script(replies, delay_s=0.02)) as srv:
        argv = [
            *("accuracy", "run", "--base-url", srv.url, "--data", str(root)),
            *("--out", str(out), "--parallel", "2", "--no-progress"),
        ]
        first = _start_run(argv, partial, 5, started)
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err == (
            f"error: --out {out}: process {first.pid} is writing this run right now (it holds "
            f"{tmp_path / '.run.json.lock'}); wait for it to end, or pick another --out\n"
        )
        _, first_err = first.communicate(timeout=60)
        assert first.returncode == 0, first_err
        assert set(srv.snapshot_calls().values()) == {1}
    assert len(_load(out)["records"]) == len(questions)
    assert not (tmp_path / ".run.json.lock").exists()


def _unfinished_run(
    data: Path, replies: dict[str, str], out: Path, model_path: str | None
) -> tuple[tuple[bytes, bytes], str]:
    """A run whose server failed one question: RUN.json and its partial file (as bytes),
    and the server's URL (nothing listens there any more)."""
    script = Script(replies=replies, fail_503={"anatomy/2": 99}, model_path=model_path)
    with FakeServer(script) as first:
        assert _run(first, data, out, "--max-retries", "0") == EXIT_SERVER
    return (out.read_bytes(), partial_path_of(out).read_bytes()), first.url


def partial_path_of(out: Path) -> Path:
    return out.with_name(out.name + ".partial.jsonl")


@pytest.mark.parametrize(
    ("stored_model", "new_model", "verdict"),
    [
        ("gemma-4", "gemma-4", "resumed"),
        ("gemma-4", "llama-4", "would mix two models in one run"),
        ("gemma-4", None, "does not name its model"),
        (None, "gemma-4", "do not record their server's model"),
    ],
)
def test_a_resume_against_another_base_url(
    dataset: tuple[Path, dict[str, WrittenQuestion]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    stored_model: str | None,
    new_model: str | None,
    verdict: str,
) -> None:
    """Another port is accepted (with a NOTE) only when the new server names the model the
    stored answers came from; otherwise the answers could mix two models: refused."""
    data, questions = dataset
    out = tmp_path / "run.json"
    replies = {qid: " A" for qid in questions}
    files, _ = _unfinished_run(data, replies, out, stored_model)
    header = json.loads(partial_path_of(out).read_text().split("\n")[0])
    assert header["served_model"] == stored_model
    stored_url = _load(out)["base_url"]
    assert header["base_url"] == stored_url
    capsys.readouterr()
    with FakeServer(Script(replies=replies, model_path=new_model)) as moved:
        code = _run(moved, data, out)
        calls = sum(moved.calls.values())
    err = capsys.readouterr().err
    if verdict == "resumed":
        assert (code, calls) == (0, 1)  # only the question that failed before
        assert (
            f"NOTE: the stored answers came from {stored_url}; this run asks {moved.url}, whose "
            "server reports the same model (gemma-4): resuming"
        ) in err
        assert _load(out)["base_url"] == moved.url and _load(out)["complete"] is True
        return
    assert (code, calls) == (2, 0)
    assert err.startswith(f"error: {partial_path_of(out)}: its answers came from --base-url ")
    assert verdict in err and len(err.splitlines()) == 1
    assert (out.read_bytes(), partial_path_of(out).read_bytes()) == files


def test_the_same_base_url_serving_another_model_is_refused(
    case: Case, capsys: pytest.CaptureFixture[str]
) -> None:
    replies = {qid: " A" for qid in case.questions}
    files, url = _unfinished_run(case.data, replies, case.out, "gemma-4")
    capsys.readouterr()
    port = int(url.rsplit(":", 1)[1])
    with FakeServer(Script(replies, model_path="llama-4"), port=port) as restarted:
        assert restarted.url == url
        assert _run(restarted, case.data, case.out) == 2
        assert sum(restarted.calls.values()) == 0
    err = capsys.readouterr().err
    assert f"whose server reported model 'gemma-4'; the server at {url} reports 'llama-4'" in err
    assert (case.out.read_bytes(), case.partial.read_bytes()) == files


@pytest.mark.parametrize(
    ("script", "cause"),
    [
        (None, "no connection to the server could be made: is it up, at that --base-url?"),
        ("503", "the server is up but answers with HTTP 5xx errors: see its log"),
        (
            "garbage",
            "the server is up but its replies are not completions: check --api and --base-url",
        ),
        ("422", "the server is up but rejects the requests (HTTP 4xx): check --api and --model"),
    ],
)
def test_an_early_stop_says_what_the_failures_were(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], script: str | None, cause: str
) -> None:
    root = tmp_path / "big"
    questions = write_dataset(root, {"s": 60})
    every = {qid: 99 for qid in questions}
    scripts = {
        "503": Script({qid: " A" for qid in questions}, fail_503=every),
        "garbage": Script({qid: " A" for qid in questions}, garbage=set(questions)),
        "422": Script({qid: " A" for qid in questions}, reject={qid: 422 for qid in questions}),
    }
    with FakeServer(scripts.get(script or "503", Script({}))) as srv:
        url = srv.url
        if script is not None:
            code = _run(srv, root, tmp_path / "r.json", "--max-retries", "0", "--parallel", "1")
    if script is None:  # the port is closed once the server stops
        code = main(
            [
                *("accuracy", "run", "--base-url", url, "--data", str(root)),
                *("--out", str(tmp_path / "r.json"), "--max-retries", "0", "--no-progress"),
                *("--parallel", "1"),
            ]
        )
    assert code == EXIT_SERVER
    err = capsys.readouterr().err
    stop = next(line for line in err.splitlines() if "stopped after 50 failures" in line)
    assert stop.endswith(f"10 question(s) not attempted ({cause})"), stop


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("http://127.0.0.1:99999", "is not a valid URL (Port out of range 0-65535)"),
        ("http://[::1", "is not a valid URL (Invalid IPv6 URL)"),
        ("http://127.0.0.1:0", "has port 0"),
        ("http://:30000", "has no valid host name"),
        ("http://exa mple:30000", "has no valid host name"),
        ("http://ex\\u00e4mple:30000", "has no valid host name"),
        (f"http://{'a' * 70}.com:30000", "has no valid host name"),  # a label over 63
        ("http://[::zz]:30000", "is not a valid URL"),
        ("ftp://127.0.0.1:30000", "must start with http:// or https://"),
        ("http://127.0.0.1:30000/?x=1", "must not have a query"),
    ],
)
def test_a_bad_base_url_is_one_line_before_any_request(
    dataset: tuple[Path, dict[str, WrittenQuestion]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    url: str,
    says: str,
) -> None:
    data, _ = dataset
    out = tmp_path / "run.json"
    code = main(["accuracy", "run", "--base-url", url, "--data", str(data), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(f"error: --base-url {url!r} {says}") and len(err.splitlines()) == 1
    assert not out.exists() and not partial_path_of(out).exists()


# Python in the C locale with its UTF-8 mode and locale coercion turned off: the preferred
# encoding is ASCII, so a file opened without an explicit encoding cannot hold "é".
ASCII_LOCALE = {"LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}


def test_an_ascii_locale_stores_resumes_and_compares_answers_that_are_not_ascii(
    tmp_path: Path,
) -> None:
    """Run files are UTF-8 whatever the locale: a run stopped by a rejected question leaves
    its non-ASCII answers in the partial file, and the rerun, in the same locale, carries them
    over, writes RUN.json and compares it."""
    questions = write_dataset(tmp_path / "mmlu", {"anatomy": 4})
    replies = {qid: f" {q.answer} — réponse « sûre »" for qid, q in questions.items()}
    env = {**os.environ, **ASCII_LOCALE, "PYTHONPATH": str(PYTHON_DIR)}
    env.pop("PYTHONIOENCODING", None)
    out = tmp_path / "RUN.json"

    def command(*argv: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [sys.executable, "-m", "sglang_nvfp4_patches", "accuracy", *argv],
            env=env,
            capture_output=True,
            timeout=60,
        )

    with FakeServer(Script(replies=replies, reject={"anatomy/2": 422})) as server:
        run = ("run", "--base-url", server.url, "--data", str(tmp_path / "mmlu"), "--out", str(out))
        stopped = command(*run)
        assert stopped.returncode == EXIT_SERVER, stopped.stderr
        kept = out.with_name(out.name + ".partial.jsonl").read_bytes().decode("utf-8")
        assert "réponse « sûre »" in kept
        server.script.reject = {}
        asked_before = dict(server.calls)
        finished = command(*run)
        assert finished.returncode == 0, finished.stderr
        asked_again = {q: n - asked_before.get(q, 0) for q, n in server.calls.items()}
    assert {q for q, n in asked_again.items() if n} == {"anatomy/2"}
    document = json.loads(out.read_bytes().decode("utf-8"))
    assert [r["output"] for r in document["records"]] == [replies[f"anatomy/{i}"] for i in range(4)]
    copy = tmp_path / "COPY.json"  # a run compared with a copy of itself
    copy.write_bytes(out.read_bytes().replace(b'"started_at": "', b'"started_at": "0'))
    compared = command("compare", str(out), str(copy))
    assert compared.returncode == 0, compared.stderr


def _file_size_limit(limit: int) -> Callable[[], None]:
    """In the child: writes past ``limit`` bytes fail (EFBIG) instead of killing it."""

    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


def test_a_disk_that_fills_mid_run_is_the_environment_and_keeps_the_answers(case: Case) -> None:
    """Once exit 70, "internal error ... this is a bug in sglang-nvfp4-patches", for ENOSPC on
    --out (a file size limit refuses the write as a full disk does)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PYTHON_DIR), *sys.path])}
    argv = ["accuracy", "run", "--base-url", case.server.url, "--data", str(case.data)]
    argv += ["--out", str(case.out), "--parallel", "2", "--no-progress"]
    full = subprocess.run(
        [sys.executable, "-m", "sglang_nvfp4_patches", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=_file_size_limit(3000),
        restore_signals=False,
    )
    assert full.returncode == EXIT_ENVIRONMENT, full.stderr
    assert full.stderr.splitlines() == [
        f"error: cannot write {case.partial}: File too large (EFBIG); what was written before "
        "is kept: make room there (or write elsewhere) and rerun the same command"
    ]
    lines = case.partial.read_text(encoding="utf-8").split("\n")  # the last one torn
    saved = {json.loads(line)["id"] for line in lines[1:-1]}
    assert 0 < len(saved) < len(case.questions) and not case.out.exists()
    before = case.server.snapshot_calls()
    assert case.run() == 0
    assert case.server.snapshot_calls() == {
        qid: before.get(qid, 0) + (qid not in saved) for qid in case.questions
    }
    assert _load(case.out)["resumed"] == len(saved)


@pytest.mark.parametrize("answers", [0, 1, 30])
def test_an_interrupt_anywhere_says_what_is_on_disk(
    answers: int,
    dataset: tuple[Path, dict[str, WrittenQuestion]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Once a stop that left the question loop itself (not caught inside it) said "nothing
    stored ... was changed" while 30 answers were kept: the line is now read back from disk,
    a torn last line not counted."""
    out = tmp_path / "run.json"
    partial = tmp_path / "run.json.partial.jsonl"

    def stopped(*_: object, **__: object) -> None:
        lines = [json.dumps({"format": "header"})]
        lines += [json.dumps({"id": f"q{i}"}) for i in range(answers)]
        partial.write_text("\n".join([*lines, '{"id": "torn'][: answers + 2]))
        raise KeyboardInterrupt

    monkeypatch.setattr("sglang_nvfp4_patches.accuracy.run.run_accuracy", stopped)
    argv = ["accuracy", "run", "--base-url", "http://127.0.0.1:9", "--data", str(dataset[0])]
    assert main([*argv, "--out", str(out)]) == 130
    said = capsys.readouterr().err.splitlines()
    kept = f"the {answers} answer(s) so far are kept in {partial}" if answers else "none is kept"
    assert len(said) == 1 and said[0].startswith("interrupted; ") and kept in said[0], said


def test_a_stop_before_the_questions_run_is_not_a_warning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Once "RuntimeWarning: coroutine '_evaluate' was never awaited" and its source line
    followed "interrupted; ...": the Ctrl-C came before the event loop ran the questions."""
    from sglang_nvfp4_patches.accuracy import run as run_module

    @contextlib.contextmanager
    def stopped_at_once() -> Iterator[None]:
        raise KeyboardInterrupt
        yield

    async def questions() -> None:
        raise AssertionError("never asked")

    monkeypatch.setattr(run_module, "python_ctrl_c", stopped_at_once)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with pytest.raises(KeyboardInterrupt):
            run_module._run_coroutine(questions())
        gc.collect()
    assert [str(warning.message) for warning in seen] == []


def test_a_stop_as_the_runner_takes_its_loop_leaves_no_open_loop(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Once "deallocating an open event loop" (uvloop's ERROR) came before "interrupted; ...":
    the Ctrl-C landed after the runner made its loop, before the runner owned it."""
    import asyncio

    pytest.importorskip("uvloop")
    from sglang_nvfp4_patches.accuracy import run as run_module

    made: list[asyncio.AbstractEventLoop] = []

    class StoppedRunner(asyncio.Runner):
        def run(self, coro: Any, **kwargs: Any) -> Any:
            made.append(self._loop_factory())  # type: ignore[attr-defined, misc]
            raise KeyboardInterrupt  # before the runner records the loop as its own

    async def questions() -> None:
        raise AssertionError("never asked")

    monkeypatch.setattr(run_module.asyncio, "Runner", StoppedRunner)
    with pytest.raises(KeyboardInterrupt):
        run_module._run_coroutine(questions())
    gc.collect()
    assert made and all(loop.is_closed() for loop in made)
    assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == []
