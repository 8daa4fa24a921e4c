"""``accuracy run`` end to end against the scripted fake server (no SGLang, no GPU)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from accuracy_support import PYTHON_DIR
from accuracy_support.dataset_writer import (
    WrittenQuestion,
    write_dataset,
    wrong_letter,
)
from accuracy_support.fake_server import FakeServer, Script
from sglang_nvfp4_patches.cli import main

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
    assert _run(server, data, out, "--timeout", "0.2", "--max-retries", "1") == 1
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
    assert _run(server, data, tmp_path / "run.json") == 1
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
    assert code == 1
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
    assert code == 1
    # Errors go to stderr, and no empty results table goes to stdout.
    assert captured.out == ""
    first = captured.err.splitlines()[0]
    assert first.startswith("ERROR: ") and "question(s) failed" in first
    assert "ClientConnectorError" in first
    assert "stopped after" in captured.err and "not attempted" in captured.err
    run = _load(tmp_path / "r.json")
    assert run["records"] == [] and run["aborted"] is True
    assert run["n_failed"] + run["n_not_attempted"] == 200


def test_rerun_of_finished_run_asks_nothing(
    dataset: tuple[Path, dict[str, WrittenQuestion]], server: FakeServer, tmp_path: Path
) -> None:
    data, _ = dataset
    out = tmp_path / "run.json"
    assert _run(server, data, out) == 0
    first = _load(out)
    before = server.snapshot_calls()
    assert _run(server, data, out) == 0
    assert server.snapshot_calls() == before
    second = _load(out)
    assert second["records"] == first["records"]
    assert second["resumed"] == len(first["records"])


def test_resume_refuses_answers_from_other_settings(
    dataset: tuple[Path, dict[str, WrittenQuestion]],
    server: FakeServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    data, _ = dataset
    out = tmp_path / "run.json"
    server.script.fail_503 = {"anatomy/1": 99}
    assert _run(server, data, out, "--max-retries", "0") == 1
    capsys.readouterr()
    assert _run(server, data, out, "--shots", "3") == 2
    err = capsys.readouterr().err
    assert "shots: stored 5, now 3" in err and "write to another --out" in err


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["SIGKILL", "SIGINT"])
def test_resume_after_kill_loses_and_repeats_nothing(
    sig: signal.Signals,
    dataset: tuple[Path, dict[str, WrittenQuestion]],
    tmp_path: Path,
    started: list[subprocess.Popen[bytes]],
) -> None:
    """SIGKILL: nothing can run on the way out; SIGINT: Ctrl-C, the clean path."""
    root = dataset[0].parent / "resume"
    questions = write_dataset(root, {"a": 40, "b": 40, "c": 40}, seed=3)
    replies = {qid: f" {q.answer}" for qid, q in questions.items()}
    out = tmp_path / "run.json"
    partial = tmp_path / "run.json.partial.jsonl"
    with FakeServer(Script(replies=replies, delay_s=0.02)) as srv:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PYTHON_DIR), *sys.path])}
        cmd = [
            *(sys.executable, "-m", "sglang_nvfp4_patches", "accuracy", "run"),
            *("--base-url", srv.url, "--data", str(root), "--out", str(out)),
            *("--parallel", "2", "--no-progress"),
        ]
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        started.append(proc)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and proc.poll() is None:
            if partial.exists() and partial.read_bytes().count(b"\n") > 20:
                break
            time.sleep(0.005)
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=10)
        if sig == signal.SIGKILL:
            assert proc.returncode == -signal.SIGKILL  # killed mid-run, not finished
        else:
            assert proc.returncode == 130, stderr
            assert b"rerun the same command to resume" in stderr
        assert not out.exists()

        lines = partial.read_text(encoding="utf-8").split("\n")
        saved = {json.loads(line)["id"]: json.loads(line) for line in lines[1:-1]}
        assert 20 <= len(saved) < len(questions)
        before = srv.snapshot_calls()
        assert all(before[qid] == 1 for qid in saved)

        srv.script.delay_s = 0.0
        assert main([*cmd[3:], "--backoff", "0.01"]) == 0
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
