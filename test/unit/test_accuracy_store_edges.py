"""``accuracy``'s result files at their edges: their exact layout, text that is not ASCII,
the settings check's message, damaged partial files, and paths that cannot be written (no
SGLang import). Found by ``scripts/mutation.sh``."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from sglang_nvfp4_patches.accuracy.errors import ConfigError, ResumeError, RunFileError
from sglang_nvfp4_patches.accuracy.store import (
    RUN_FORMAT,
    RUN_VERSION,
    PartialWriter,
    ensure_output_dir,
    is_valid_record,
    load_finished_run,
    load_partial,
    partial_path,
    run_file_text,
    write_json_atomic,
)

SERVER = {"model_path": "/models/gemma", "flags": ["--tp-size", "1"], "launcher": "serve"}
SETTINGS = {"api": "native", "model": None, "shots": 5, "max_new_tokens": 2, "server": SERVER}
RECORD = {
    "id": "économie/0",
    "subject": "économie",
    "index": 0,
    "prediction": "B",
    "answer": "B",
    "correct": True,
    "output": " B — oui",
}


def test_the_run_file_layout() -> None:
    """Indented metadata, one record per line, text as written (not \\u escapes)."""
    data = {"format": "f", "subjects": ["économie"], "records": [RECORD, RECORD]}
    line = (
        '  {"id": "économie/0", "subject": "économie", "index": 0, "prediction": "B", '
        '"answer": "B", "correct": true, "output": " B — oui"}'
    )
    assert run_file_text(data) == (
        '{\n "format": "f",\n "subjects": [\n  "économie"\n ],\n'
        f' "records": [\n{line},\n{line}\n ]\n}}\n'
    )
    assert (
        run_file_text({"format": "f", "records": []}) == '{\n "format": "f",\n "records": []\n}\n'
    )


def test_written_files_keep_the_text_as_written(tmp_path: Path) -> None:
    out = tmp_path / "RUN.json"
    write_json_atomic(out, {"records": [RECORD]})
    assert '"subject": "économie"' in out.read_text(encoding="utf-8")
    writer = PartialWriter(partial_path(out), SETTINGS, [])
    writer.append(RECORD)
    writer.close()
    lines = partial_path(out).read_text(encoding="utf-8").splitlines()
    assert lines[1] == (
        '{"id":"économie/0","subject":"économie","index":0,"prediction":"B","answer":"B",'
        '"correct":true,"output":" B — oui"}'
    )


def test_a_writer_closes_once_refuses_appends_after_and_removes_its_file_once(
    tmp_path: Path,
) -> None:
    path = tmp_path / "RUN.json.partial.jsonl"
    writer = PartialWriter(path, SETTINGS, [])
    writer.close()
    writer.close()
    with pytest.raises(ValueError) as closed:
        writer.append(RECORD)
    assert str(closed.value) == f"{path}: writer already closed"
    writer.remove()
    assert not path.exists()
    writer.remove()


def test_other_settings_are_named_field_by_field(tmp_path: Path) -> None:
    out = tmp_path / "RUN.json"
    head = {"format": RUN_FORMAT, "version": RUN_VERSION, **SETTINGS}
    write_json_atomic(out, {**head, "records": [RECORD]})
    now = {**SETTINGS, "shots": 0, "server": {**SERVER, "launcher": "launch_server", "port": 1}}
    with pytest.raises(ResumeError) as refused:
        load_finished_run(out, now)
    assert str(refused.value) == (
        f"{out} holds answers from a run with other settings (shots: stored 5, now 0; "
        "server.launcher: stored 'serve', now 'launch_server'; server.port: stored None, now 1); "
        "reusing them would mix two configurations in one run: rerun with the settings it was "
        f"started with, write to another --out (--out-dir for ab), or delete {out} to start over"
    )


def test_a_server_setting_that_was_not_there_is_named_whole(tmp_path: Path) -> None:
    path = tmp_path / "RUN.json.partial.jsonl"
    PartialWriter(path, {**SETTINGS, "server": None}, []).close()
    with pytest.raises(ResumeError) as refused:
        load_partial(path, SETTINGS)
    assert f"server: stored None, now {SERVER!r}" in str(refused.value)
    assert str(refused.value).startswith(f"{path} holds answers from a run with other settings")


def test_a_damaged_line_in_the_middle_of_a_partial_file_is_dropped_alone(
    tmp_path: Path,
) -> None:
    path = tmp_path / "RUN.json.partial.jsonl"
    PartialWriter(path, SETTINGS, [RECORD]).close()
    second = {**RECORD, "id": "économie/1", "index": 1}
    with path.open("a", encoding="utf-8") as handle:
        handle.write('{"id": "économie/9", "sub\n')
        handle.write('{"id":"économie/1","subject":"économie","index":1,"prediction":"B",')
        handle.write('"answer":"B","correct":true,"output":" B — oui"}\n')
    assert load_partial(path, SETTINGS).records == [RECORD, second]


def test_unreadable_partial_and_run_files_say_so(tmp_path: Path) -> None:
    folder = tmp_path / "RUN.json.partial.jsonl"
    folder.mkdir()
    with pytest.raises(RunFileError) as partial:
        load_partial(folder, SETTINGS)
    assert str(partial.value) == (
        f"{folder}: is a directory, not a regular file; give the path of a run file"
    )
    broken = tmp_path / "RUN.json"
    broken.write_text("{not json", encoding="utf-8")
    with pytest.raises(RunFileError) as finished:
        load_finished_run(broken, SETTINGS)
    message = str(finished.value)
    assert message.startswith(f"{broken}: exists but is not readable JSON (")
    assert message.endswith("); move it away")


@pytest.mark.parametrize("prediction", [5, ["B"], True])
def test_a_record_whose_prediction_is_not_text_or_none_is_damaged(prediction: object) -> None:
    assert is_valid_record({**RECORD, "prediction": None})
    assert not is_valid_record({**RECORD, "prediction": prediction})


def test_an_out_dir_that_is_a_file_or_cannot_be_written_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    existing = tmp_path / "results"
    existing.write_text("", encoding="utf-8")
    with pytest.raises(ConfigError) as is_file:
        ensure_output_dir(existing, "--out-dir")
    assert str(is_file.value) == (
        f"--out-dir {existing}: is an existing file, not a directory; pick another path"
    )

    def refused(*_args: object, **_kwargs: object) -> tuple[int, str]:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", refused)
    target = tmp_path / "new" / "runs"
    with pytest.raises(ConfigError) as read_only:
        ensure_output_dir(target, "--out-dir")
    assert str(read_only.value) == (
        f"--out-dir {target}: cannot write there (Permission denied); pick a directory you "
        "can write to"
    )
