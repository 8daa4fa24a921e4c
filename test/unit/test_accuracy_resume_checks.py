"""What a resume does with the answers it finds: every stored record is checked as
``compare`` checks it, a damaged line is named, and a file that holds no answer blocks
nothing (in-process runs against the scripted server)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from accuracy_support.dataset_writer import WrittenQuestion, write_dataset
from accuracy_support.fake_server import FakeServer, Script
from sglang_nvfp4_patches.accuracy.compare import load_run
from sglang_nvfp4_patches.accuracy.errors import RunFileError
from sglang_nvfp4_patches.accuracy.store import PartialWriter
from sglang_nvfp4_patches.cli import main
from sglang_nvfp4_patches.errors import EXIT_OK, EXIT_SERVER, EXIT_USAGE

FAILS = "anatomy/1"  # the question the server fails on the first run


@pytest.fixture
def questions(tmp_path: Path) -> dict[str, WrittenQuestion]:
    return write_dataset(tmp_path / "mmlu", {"anatomy": 6, "law": 4})


@pytest.fixture
def server(questions: dict[str, WrittenQuestion]) -> Iterator[FakeServer]:
    replies = {q.qid: f" {q.answer}" if q.index % 2 else " I think" for q in questions.values()}
    with FakeServer(Script(replies=replies)) as srv:
        yield srv


def _run(url: str, tmp_path: Path, *extra: str) -> int:
    argv = ["accuracy", "run", "--base-url", url, "--data", str(tmp_path / "mmlu")]
    out = ["--out", str(tmp_path / "run.json"), "--parallel", "1", "--backoff", "0"]
    return main([*argv, *out, "--no-progress", "--max-retries", "0", *extra])


def _unfinished(server: FakeServer, tmp_path: Path) -> Path:
    """A run that stored every answer but one: its partial file."""
    server.script.fail_503 = {FAILS: 1}
    assert _run(server.url, tmp_path) == EXIT_SERVER
    return tmp_path / "run.json.partial.jsonl"


def _edit_line(path: Path, number: int, edit) -> dict:
    lines = path.read_text(encoding="utf-8").splitlines()
    record = json.loads(lines[number - 1])
    lines[number - 1] = json.dumps(edit(record))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return record


def _flipped(record: dict) -> dict:
    return {**record, "correct": not record["correct"]}


def _without_prediction(record: dict) -> dict:
    return {key: value for key, value in record.items() if key != "prediction"}


@pytest.mark.parametrize(
    ("edit", "says"),
    [(_flipped, "says correct: "), (_without_prediction, "lacks a valid")],
    ids=["correct-flipped", "no-prediction"],
)
def test_a_resume_refuses_an_edited_record_of_the_partial_file_naming_its_line(
    server: FakeServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    edit,
    says: str,
) -> None:
    """Once accepted: the RUN.json it wrote reported 0.8833 for 0.8917, and compare then
    refused it as edited."""
    partial = _unfinished(server, tmp_path)
    record = _edit_line(partial, 3, edit)
    capsys.readouterr()
    before = server.snapshot_calls()
    assert _run(server.url, tmp_path) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith(f"error: {partial}:3: ") and says in err, err
    assert len(err.splitlines()) == 1
    if edit is _flipped:
        assert f"({record['id']}) says correct: " in err
    assert server.snapshot_calls() - before == {}  # nothing asked


@pytest.mark.parametrize("edit", [_flipped, _without_prediction], ids=["flipped", "no-prediction"])
def test_a_resume_refuses_an_edited_record_of_the_run_file(
    server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str], edit
) -> None:
    assert _run(server.url, tmp_path) == EXIT_OK
    out = tmp_path / "run.json"
    run = json.loads(out.read_text(encoding="utf-8"))
    run["records"][4] = edit(run["records"][4])
    out.write_text(json.dumps(run), encoding="utf-8")
    capsys.readouterr()
    assert _run(server.url, tmp_path) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith(f"error: {out}: records[4] ") and len(err.splitlines()) == 1, err
    with pytest.raises(RunFileError, match=r"records\[4\] "):  # compare refuses it too
        load_run(out)


def test_a_damaged_line_is_named_before_its_question_is_asked_again(
    server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    partial = _unfinished(server, tmp_path)
    (tmp_path / "run.json").unlink()  # as a killed run leaves it: its partial file only
    lines = partial.read_text(encoding="utf-8").splitlines()
    damaged = json.loads(lines[4])["id"]
    lines[4] = lines[4][:20]  # line 5 cut short
    partial.write_text("\n".join(lines) + "\n", encoding="utf-8")
    capsys.readouterr()
    before = server.snapshot_calls()
    assert _run(server.url, tmp_path) == EXIT_OK
    assert server.snapshot_calls() - before == {damaged: 1, FAILS: 1}
    err = capsys.readouterr().err.splitlines()
    assert err[0] == (
        f"NOTE: {partial}:5: a damaged line (not JSON: cut short when a run was killed, or "
        "edited) is dropped; a question answered only there is asked again"
    )
    assert load_run(tmp_path / "run.json").complete


def test_a_run_that_stored_no_answer_does_not_block_the_corrected_rerun(
    server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Once: "holds answers from a run with other settings (api ...)" although it held none.
    Such a run now leaves no file; the one an earlier version left holds nothing to keep."""
    with FakeServer(Script(replies={})) as down:
        url = down.url  # nothing listens there once it stops
    assert _run(url, tmp_path, "--api", "openai") == EXIT_SERVER
    out, partial = tmp_path / "run.json", tmp_path / "run.json.partial.jsonl"
    assert not out.exists() and not partial.exists()
    openai = {"api": "openai", "model": "default", "shots": 5, "max_new_tokens": 2, "server": None}
    PartialWriter(partial, openai, []).close()  # what that run left before
    capsys.readouterr()
    assert _run(server.url, tmp_path) == EXIT_OK
    err = capsys.readouterr().err
    assert f"NOTE: {partial} holds no answer (its run, with " in err
    assert "api: stored 'openai', now 'native'" in err and "starts afresh" in err
    run = load_run(out)
    assert run.complete and len(run.records) == 10 and run.settings["api"] == "native"
