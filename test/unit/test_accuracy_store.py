"""Partial-results storage, RUN.json encoding, and the HTTP client's pure helpers."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import accuracy_support  # noqa: F401  (makes the package importable)
from sglang_nvfp4_patches.accuracy.errors import ResumeError, RunFileError
from sglang_nvfp4_patches.accuracy.run import (
    Api,
    backoff_delay,
    endpoint_url,
    request_body,
    response_text,
)
from sglang_nvfp4_patches.accuracy.store import (
    PARTIAL_FORMAT,
    RUN_FORMAT,
    PartialWriter,
    load_finished_run,
    load_partial,
    run_file_text,
    write_json_atomic,
)

SETTINGS = {"api": "native", "model": None, "shots": 5, "max_new_tokens": 2, "server": None}


def _record(qid: str, correct: bool = True) -> dict:
    return {
        "id": qid,
        "subject": qid.split("/")[0],
        "index": int(qid.split("/")[1]),
        "prediction": "A" if correct else None,
        "answer": "A",
        "correct": correct,
        "output": " A" if correct else " I think",
    }


json_scalars = st.none() | st.booleans() | st.integers() | st.text() | st.floats(allow_nan=False)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=10,
)


@given(
    meta=st.dictionaries(st.text().filter(lambda k: k != "records"), json_values, max_size=5),
    records=st.none() | st.lists(st.dictionaries(st.text(), json_values, max_size=4), max_size=5),
)
def test_run_file_text_round_trips(meta: dict, records: list | None) -> None:
    data = dict(meta) if records is None else {**meta, "records": records}
    assert json.loads(run_file_text(data)) == data


def test_run_file_has_one_record_per_line(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    write_json_atomic(path, {"accuracy": 0.5, "records": [_record("a/0"), _record("a/1")]})
    lines = path.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line.strip().rstrip(",")) for line in lines[3:5]] == [
        _record("a/0"),
        _record("a/1"),
    ]
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]  # no temporary file left


def test_partial_round_trip_and_torn_lines(tmp_path: Path) -> None:
    path = tmp_path / "run.json.partial.jsonl"
    writer = PartialWriter(path, SETTINGS, [_record("a/0")])
    writer.append(_record("a/1", correct=False))
    writer.close()
    stored = load_partial(path, SETTINGS)
    assert stored.records == [_record("a/0"), _record("a/1", correct=False)]
    assert stored.meta == {"format": PARTIAL_FORMAT, "version": 1, **SETTINGS}

    with path.open("a", encoding="utf-8") as handle:  # damage: a torn line
        handle.write('{"id": "a/2", "subj')
    torn = load_partial(path, SETTINGS)
    assert [r["id"] for r in torn.records] == ["a/0", "a/1"]
    assert torn.notes == (
        f"NOTE: {path}:4: a damaged line (not JSON: cut short when a run was killed, or "
        "edited) is dropped; a question answered only there is asked again",
    )

    # Reopening rewrites the file without the damage, so appends start on a clean line.
    writer = PartialWriter(path, SETTINGS, load_partial(path, SETTINGS).records)
    writer.append(_record("a/2"))
    writer.close()
    assert [r["id"] for r in load_partial(path, SETTINGS).records] == ["a/0", "a/1", "a/2"]
    assert path.read_text(encoding="utf-8").count("\n") == 4


@pytest.mark.parametrize("content", [b"", b'{"format": "sglang-nv'])
def test_partial_with_torn_header_is_empty(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "p.jsonl"
    path.write_bytes(content)
    assert load_partial(path, SETTINGS).records == []


def test_partial_from_other_settings_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    PartialWriter(path, SETTINGS, [_record("a/0")]).close()
    other = {**SETTINGS, "api": "openai", "model": "m"}
    with pytest.raises(ResumeError, match="api: stored 'native', now 'openai'; model: stored"):
        load_partial(path, other)


def test_foreign_partial_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text('{"something": "else"}\n{"id": "a/0"}\n', encoding="utf-8")
    with pytest.raises(ResumeError, match="not a partial results file"):
        load_partial(path, SETTINGS)
    path.write_text('{"broken\n{"id": "a/0"}\n', encoding="utf-8")
    with pytest.raises(ResumeError, match="damaged header line"):
        load_partial(path, SETTINGS)


def test_finished_run_seeds_resume(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    assert load_finished_run(path, SETTINGS).records == []
    head = {"format": RUN_FORMAT, "version": 1, **SETTINGS}
    write_json_atomic(path, {**head, "records": [_record("a/0")]})
    assert load_finished_run(path, SETTINGS).records == [_record("a/0")]
    with pytest.raises(ResumeError, match="shots: stored 5, now 0"):
        load_finished_run(path, {**SETTINGS, "shots": 0})
    path.write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(RunFileError, match="not a run file"):
        load_finished_run(path, SETTINGS)


@pytest.mark.parametrize(
    ("base", "api", "url"),
    [
        ("http://h:30000", Api.NATIVE, "http://h:30000/generate"),
        ("http://h:30000/", Api.NATIVE, "http://h:30000/generate"),
        ("http://h:30000", Api.OPENAI, "http://h:30000/v1/completions"),
        ("http://h:30000/v1/", Api.OPENAI, "http://h:30000/v1/completions"),
    ],
)
def test_endpoint_url(base: str, api: Api, url: str) -> None:
    assert endpoint_url(base, api) == url


def test_request_bodies() -> None:
    assert json.loads(request_body(Api.NATIVE, "Q\nAnswer:", 2, "ignored")) == {
        "text": "Q\nAnswer:",
        "sampling_params": {"temperature": 0, "max_new_tokens": 2},
    }
    assert json.loads(request_body(Api.OPENAI, "Q é", 1, "gemma")) == {
        "model": "gemma",
        "prompt": "Q é",
        "max_tokens": 1,
        "temperature": 0,
    }


def test_response_text_shapes() -> None:
    assert response_text(Api.NATIVE, b'{"text": " B", "meta_info": {}}') == " B"
    assert response_text(Api.OPENAI, b'{"choices": [{"text": " C"}]}') == " C"
    for api, raw in [
        (Api.NATIVE, b'{"choices": [{"text": " C"}]}'),
        (Api.NATIVE, b"[]"),
        (Api.OPENAI, b'{"choices": []}'),
        (Api.OPENAI, b'{"text": " B"}'),
    ]:
        with pytest.raises(ValueError, match="response JSON has no string"):
            response_text(api, raw)
    with pytest.raises(ValueError):
        response_text(Api.NATIVE, b"<html>")


def test_backoff_grows_with_jitter_and_cap() -> None:
    rng = random.Random(1)
    for retry, step in [(0, 0.5), (1, 1.0), (2, 2.0), (3, 3.0), (6, 3.0)]:
        delays = [backoff_delay(retry, 0.5, rng, max_s=3.0) for _ in range(200)]
        assert all(step / 2 <= d <= step for d in delays)
        assert max(delays) - min(delays) > step / 4  # jittered, not constant


def test_a_stored_file_of_another_version_or_format_is_refused(tmp_path: Path) -> None:
    """A resume must not read answers from a layout this release does not know."""
    partial = tmp_path / "p.jsonl"
    head = {"format": PARTIAL_FORMAT, "version": 2, **SETTINGS}
    partial.write_text(json.dumps(head) + "\n" + json.dumps(_record("a/0")) + "\n")
    with pytest.raises(RunFileError, match="its header's 'version' is 2; this sglang-nvfp4"):
        load_partial(partial, SETTINGS)
    run = tmp_path / "run.json"
    write_json_atomic(run, {"format": "other", "version": 1, **SETTINGS, "records": []})
    with pytest.raises(RunFileError, match=r"'format' field is 'other'.*pick another --out"):
        load_finished_run(run, SETTINGS)
