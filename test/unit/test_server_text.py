"""What a server sends back is shown and stored safely: control characters escaped wherever
its text reaches a terminal, and each stored answer bounded, a cut one marked and reported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accuracy_support.dataset_writer import write_dataset
from accuracy_support.fake_server import FakeServer, Script
from sglang_nvfp4_patches.accuracy.limits import MAX_OUTPUT_CHARS
from sglang_nvfp4_patches.accuracy.run import _snippet, served_model
from sglang_nvfp4_patches.cli import main
from sglang_nvfp4_patches.streams import printable


def test_control_characters_are_escaped_and_text_is_kept() -> None:
    assert printable("ok é 中 \x1b[2J\x07\r\n\t\x7f\x9b") == r"ok é 中 \x1b[2J\x07\r\n\t\x7f\x9b"
    assert _snippet(b"\x1b]0;owned\x07 boom") == r"\x1b]0;owned\x07 boom"


def test_a_model_name_with_escape_sequences_is_shown_escaped() -> None:
    with FakeServer(Script(replies={}, model_path="m\x1b[31m\x07")) as server:
        assert served_model(server.url, 5) == r"m\x1b[31m\x07"


def test_a_long_answer_is_cut_marked_and_reported_by_compare(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    questions = write_dataset(tmp_path / "mmlu", {"anatomy": 4})
    tail = "y" * (5 * MAX_OUTPUT_CHARS)
    long = {qid: f" {q.answer}. {tail}" for qid, q in questions.items()}
    runs = {}
    for side, replies in (
        ("A", long),
        ("B", {qid: f" {q.answer}" for qid, q in questions.items()}),
    ):
        with FakeServer(Script(replies=replies)) as server:
            out = tmp_path / f"{side}.json"
            argv = ["accuracy", "run", "--base-url", server.url, "--data", str(tmp_path / "mmlu")]
            assert main([*argv, "--out", str(out), "--no-progress"]) == 0
        runs[side] = json.loads(out.read_text())
    for record in runs["A"]["records"]:
        assert len(record["output"]) == MAX_OUTPUT_CHARS
        assert record["output_cut"] == len(long[record["id"]])
        assert record["correct"] is True  # read from the whole answer
    assert all("output_cut" not in record for record in runs["B"]["records"])
    capsys.readouterr()
    files = [str(tmp_path / "A.json"), str(tmp_path / "B.json")]
    assert main(["accuracy", "compare", *files, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["cut_outputs"] == {"A": 4, "B": 0}
    assert main(["accuracy", "compare", *files]) == 0
    assert f"cut at {MAX_OUTPUT_CHARS} characters (4 in A, 0 in B)" in capsys.readouterr().out


def test_the_run_summary_says_how_many_stored_answers_were_cut(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Once only compare said so; run's own summary line was silent. Every other answer is one
    character over the limit, the rest exactly at it (kept whole)."""
    questions = write_dataset(tmp_path / "mmlu", {"anatomy": 5, "virology": 4})
    replies = {}
    for qid, q in questions.items():
        head = f" {q.answer}. "
        replies[qid] = head + "y" * (MAX_OUTPUT_CHARS - len(head) + (q.index % 2 == 0))
    over = sum(len(reply) > MAX_OUTPUT_CHARS for reply in replies.values())
    assert over == 5 and sum(len(reply) == MAX_OUTPUT_CHARS for reply in replies.values()) == 4
    out = tmp_path / "run.json"
    with FakeServer(Script(replies=replies)) as server:
        argv = ["accuracy", "run", "--base-url", server.url, "--data", str(tmp_path / "mmlu")]
        argv += ["--out", str(out), "--no-progress"]
        assert main([*argv, "--subjects", "anatomy"]) == 0
        assert main(argv) == 0  # virology's questions asked, anatomy's resumed
        assert main(argv) == 0  # every answer stored: nothing asked
    said = [line for line in capsys.readouterr().out.splitlines() if line.startswith("accuracy ")]
    assert [line.split("questions/s ")[1] for line in said] == [
        f"(5 asked now, 0 resumed); 3 answer(s) stored cut at {MAX_OUTPUT_CHARS} characters",
        f"(4 asked now, 5 resumed); {over} answer(s) stored cut at {MAX_OUTPUT_CHARS} characters",
        f"(0 asked now, 9 resumed); {over} answer(s) stored cut at {MAX_OUTPUT_CHARS} characters",
    ]
    assert sum("output_cut" in record for record in json.loads(out.read_text())["records"]) == over


def test_a_run_with_no_answer_cut_says_nothing_of_cuts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    questions = write_dataset(tmp_path / "mmlu", {"anatomy": 3})
    replies = {qid: f" {q.answer}. ".ljust(MAX_OUTPUT_CHARS, "y") for qid, q in questions.items()}
    with FakeServer(Script(replies=replies)) as server:
        argv = ["accuracy", "run", "--base-url", server.url, "--data", str(tmp_path / "mmlu")]
        assert main([*argv, "--out", str(tmp_path / "run.json"), "--no-progress"]) == 0
    (summary,) = [line for line in capsys.readouterr().out.splitlines() if "questions/s" in line]
    assert summary.endswith("questions/s (3 asked now, 0 resumed)"), summary
