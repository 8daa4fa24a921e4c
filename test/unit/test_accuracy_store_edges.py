"""``accuracy``'s result files at their edges: their exact layout, text that is not ASCII,
the settings check's message, damaged partial files, and paths that cannot be written (no
SGLang import). Found by ``scripts/mutation.sh``."""

from __future__ import annotations

import errno
import json
import os
import tempfile
from pathlib import Path

import pytest

from sglang_nvfp4_patches.accuracy.errors import ConfigError, ResumeError, RunFileError
from sglang_nvfp4_patches.accuracy.store import (
    PARTIAL_FORMAT,
    RUN_FORMAT,
    RUN_VERSION,
    PartialWriter,
    Stored,
    answers_on_disk,
    ensure_output_dir,
    ensure_output_file,
    load_finished_run,
    load_partial,
    partial_path,
    record_problem,
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


def test_a_writer_closes_once_and_refuses_appends_after(tmp_path: Path) -> None:
    path = tmp_path / "RUN.json.partial.jsonl"
    writer = PartialWriter(path, SETTINGS, [])
    writer.close()
    writer.close()
    with pytest.raises(ValueError, match="closed file"):
        writer.append(RECORD)


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
    PartialWriter(path, {**SETTINGS, "server": None}, [RECORD]).close()
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
    assert record_problem({**RECORD, "prediction": None, "correct": False}) is None
    assert record_problem({**RECORD, "prediction": prediction}) == (
        "lacks a valid id/subject/answer/correct/prediction"
    )


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


# What the longest of ``--out NAME``'s files adds to NAME: the partial file's temporary,
# ``.NAME.partial.jsonl.<pid of up to 7 digits>.tmp``, counted here by hand.
SUFFIX_BYTES = len(".") + len(".partial.jsonl") + len(".4194304") + len(".tmp")


def _file_system_names_up_to(limit: int | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Simulate a file system whose names hold ``limit`` bytes (eCryptfs: 143), or one that
    cannot say (``None``: pathconf fails, as on some network file systems)."""

    def pathconf(path: object, name: str) -> int:
        if name != "PC_NAME_MAX":
            raise ValueError("unrecognized configuration name")
        if limit is None:
            raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))
        return limit

    monkeypatch.setattr(os, "pathconf", pathconf)


@pytest.mark.parametrize(("limit", "assumed"), [(143, 143), (None, 255)])
def test_an_out_name_is_refused_exactly_when_its_temporary_would_pass_the_name_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, limit: int | None, assumed: int
) -> None:
    _file_system_names_up_to(limit, monkeypatch)
    longest = tmp_path / ("r" * (assumed - SUFFIX_BYTES))
    ensure_output_file(longest, "--out")  # accepted: its temporary's name is `assumed` bytes
    too_long = tmp_path / ("r" * (assumed - SUFFIX_BYTES + 1))
    with pytest.raises(ConfigError) as refused:
        ensure_output_file(too_long, "--out")
    assert str(refused.value) == (
        f"--out {too_long}: the file name is too long: with the suffixes of its partial and "
        f"temporary files it passes the {assumed} bytes this file system allows; pick a "
        "shorter name"
    )
    names = "é" * ((assumed - SUFFIX_BYTES) // 2 + 1)  # two bytes each: the limit is in bytes
    with pytest.raises(ConfigError, match="the file name is too long"):
        ensure_output_file(tmp_path / names, "--out")


def test_an_out_dir_that_is_a_fifo_or_lies_under_one_is_refused_naming_it(tmp_path: Path) -> None:
    fifo = tmp_path / "results"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError) as is_fifo:
        ensure_output_dir(fifo, "--out-dir")
    assert str(is_fifo.value) == (
        f"--out-dir {fifo}: is a FIFO (named pipe), not a directory; pick another path"
    )
    with pytest.raises(ConfigError) as under_fifo:
        ensure_output_file(fifo / "RUN.json", "--out")
    assert str(under_fifo.value) == (
        f"--out {fifo / 'RUN.json'}: lies under {fifo}, which is a FIFO (named pipe), not a "
        "directory; pick another path"
    )
    blocker = tmp_path / "a-file"
    blocker.write_text("keep me", encoding="utf-8")
    with pytest.raises(ConfigError) as under_file:
        ensure_output_dir(blocker / "runs", "--out-dir")
    assert str(under_file.value) == (
        f"--out-dir {blocker / 'runs'}: lies under {blocker}, which is a file, not a directory; "
        "pick another path"
    )


def test_nothing_stored_yet_is_empty_metadata_and_no_answers(tmp_path: Path) -> None:
    out = tmp_path / "RUN.json"
    assert load_partial(partial_path(out), SETTINGS) == Stored({}, [])
    assert load_finished_run(out, SETTINGS) == Stored({}, [])
    partial_path(out).write_bytes(b'{"format": "sglang-nv')  # killed while writing its header
    assert load_partial(partial_path(out), SETTINGS) == Stored({}, [])


def test_a_finished_run_gives_its_metadata_without_its_records(tmp_path: Path) -> None:
    out = tmp_path / "RUN.json"
    head = {"format": RUN_FORMAT, "version": RUN_VERSION, **SETTINGS, "complete": True}
    write_json_atomic(out, {**head, "records": [RECORD]})
    assert load_finished_run(out, SETTINGS) == Stored(head, [RECORD])


def test_a_json_file_that_is_not_a_run_file_is_refused_naming_it(tmp_path: Path) -> None:
    out = tmp_path / "RUN.json"
    out.write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(RunFileError) as refused:
        load_finished_run(out, SETTINGS)
    assert str(refused.value) == (
        f"{out}: not a run file (expected an object with a 'records' list, as accuracy run "
        "writes); move it away or pick another --out"
    )


def test_a_partial_file_of_another_version_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "RUN.json.partial.jsonl"
    head = {"format": PARTIAL_FORMAT, "version": 2, **SETTINGS}
    path.write_text(json.dumps(head) + "\n", encoding="utf-8")
    with pytest.raises(RunFileError) as refused:
        load_partial(path, SETTINGS)
    assert str(refused.value) == (
        f"{path}: its header's 'version' is 2; this sglang-nvfp4-patches reads version 1 only "
        "(a newer release may have written it: upgrade to read it)"
    )


def test_a_partial_header_without_a_version_is_read_as_version_1(tmp_path: Path) -> None:
    """Partial files written before headers carried a version are resumed."""
    path = tmp_path / "RUN.json.partial.jsonl"
    head = {"format": PARTIAL_FORMAT, **SETTINGS}
    lines = [json.dumps(head, ensure_ascii=False), json.dumps(RECORD, ensure_ascii=False)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert load_partial(path, SETTINGS) == Stored(head, [RECORD])


DAMAGED = "lacks a valid id/subject/answer/correct/prediction"
START_OVER = "(or write to another --out, --out-dir for ab) to start over"


def test_a_blank_line_in_a_partial_file_is_skipped_and_reading_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "RUN.json.partial.jsonl"
    second = {**RECORD, "id": "économie/1", "index": 1}
    PartialWriter(path, SETTINGS, [RECORD]).close()
    with path.open("a", encoding="utf-8") as handle:
        handle.write("\n" + json.dumps(second) + "\n")
    assert load_partial(path, SETTINGS).records == [RECORD, second]


def test_a_damaged_record_is_refused_naming_where_it_is_and_how_to_start_over(
    tmp_path: Path,
) -> None:
    partial = tmp_path / "RUN.json.partial.jsonl"
    PartialWriter(partial, SETTINGS, [RECORD, {**RECORD, "correct": "yes"}]).close()
    with pytest.raises(ResumeError) as refused:
        load_partial(partial, SETTINGS)
    assert str(refused.value) == (
        f"{partial}:3: {DAMAGED}: restore it, or delete {partial} {START_OVER}"
    )
    out = tmp_path / "RUN.json"
    head = {"format": RUN_FORMAT, "version": RUN_VERSION, **SETTINGS}
    write_json_atomic(out, {**head, "records": [{"id": 1}]})
    with pytest.raises(ResumeError) as refused:
        load_finished_run(out, SETTINGS)
    assert str(refused.value) == (
        f"{out}: records[0] {DAMAGED}: restore it, or delete {out} {START_OVER}"
    )


def test_a_run_with_other_settings_and_no_answer_starts_afresh_with_a_note(
    tmp_path: Path,
) -> None:
    out = tmp_path / "RUN.json"
    head = {"format": RUN_FORMAT, "version": RUN_VERSION, **SETTINGS}
    write_json_atomic(out, {**head, "records": []})
    stored = load_finished_run(out, {**SETTINGS, "shots": 0, "max_new_tokens": 3})
    assert (stored.meta, stored.records) == ({}, [])
    assert stored.notes == (
        f"NOTE: {out} holds no answer (its run, with other settings: shots: stored 5, now 0; "
        "max_new_tokens: stored 2, now 3, stored none): nothing to keep, so this run starts "
        "afresh",
    )


@pytest.mark.parametrize(
    ("partial", "finished", "expected"),
    [
        (None, None, "0 in partial"),
        ("directory", None, "0 in partial"),
        (None, "directory", "0 in partial"),
        (None, b"{not json", "0 in partial"),
        (None, b"{}", "0 in partial"),
        (None, b"[]", "0 in partial"),
        (None, b'{"records": [{}, {}]}', "2 in out"),
        (b"header\n1\n2\n3\n", b'{"records": []}', "3 in partial"),
        (b"header\n1\n2\n3", None, "2 in partial"),  # the last line torn
    ],
)
def test_the_answers_on_disk_are_counted_whatever_the_files_hold(
    tmp_path: Path, partial: bytes | str | None, finished: bytes | str | None, expected: str
) -> None:
    """What an interrupt line reports: never an error, whatever an earlier run left there."""
    out = tmp_path / "RUN.json"
    for path, content in ((partial_path(out), partial), (out, finished)):
        if content == "directory":
            path.mkdir()
        elif isinstance(content, bytes):
            path.write_bytes(content)
    count, where = expected.split(" in ")
    assert answers_on_disk(out) == (int(count), partial_path(out) if where == "partial" else out)


class _FullDisk:
    """A write handle whose flush fails as a full disk does: an OSError naming no file."""

    def write(self, data: bytes) -> int:
        return len(data)

    def flush(self) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    close = flush


def test_a_write_that_fails_without_a_name_names_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "RUN.json.partial.jsonl"
    writer = PartialWriter(path, SETTINGS, [])
    real, writer._handle = writer._handle, _FullDisk()  # type: ignore[assignment]
    with pytest.raises(OSError) as appended:
        writer.append(RECORD)
    with pytest.raises(OSError) as closed:
        writer.close()
    real.close()  # type: ignore[union-attr]

    def no_room(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", no_room)
    out = tmp_path / "RUN.json"
    with pytest.raises(OSError) as replaced:
        write_json_atomic(out, {"records": []})
    for error, named in ((appended, path), (closed, path), (replaced, out)):
        assert (error.value.errno, error.value.filename) == (errno.ENOSPC, str(named))
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # no temporary left
