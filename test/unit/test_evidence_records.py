"""Evidence records: keyed by version and by the content of the SGLang sources they ran
through; a shipped record and one ``verify`` wrote are both found; a record is never
overwritten by a different one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sglang_nvfp4_patches.evidence_records import (
    RECORDS_ENV,
    Record,
    RecordConflict,
    find_record,
    fingerprint_at,
    write_record,
)

SOURCES = ("srt/layers/moe", "srt/server_args.py")


@pytest.fixture
def package(tmp_path: Path) -> Path:
    root = tmp_path / "site" / "sglang"
    (root / "srt" / "layers" / "moe").mkdir(parents=True)
    (root / "srt" / "layers" / "moe" / "runner.py").write_text("RUNNER = 1\n")
    (root / "srt" / "server_args.py").write_text("ARGS = 1\n")
    (root / "srt" / "other.py").write_text("OTHER = 1\n")
    return root


@pytest.fixture(autouse=True)
def records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "records"
    monkeypatch.setenv(RECORDS_ENV, str(directory))
    return directory


def digest(package: Path) -> str:
    fingerprint_at.cache_clear()
    return fingerprint_at((str(package),), SOURCES)


def test_the_fingerprint_follows_the_content_of_the_sources_only(package: Path) -> None:
    before = digest(package)
    (package / "srt" / "other.py").write_text("OTHER = 2\n")  # not a source
    assert digest(package) == before
    (package / "srt" / "layers" / "moe" / "runner.py").write_text("RUNNER = 2\n")
    assert digest(package) != before
    changed = digest(package)
    (package / "srt" / "layers" / "moe" / "new.py").write_text("\n")  # a new file counts
    assert digest(package) != changed


def test_a_copy_first_on_the_path_is_what_is_fingerprinted(package: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy" / "sglang" / "srt"
    copy.mkdir(parents=True)
    (copy / "server_args.py").write_text("ARGS = 2\n")
    fingerprint_at.cache_clear()
    shadowed = fingerprint_at((str(copy.parent), str(package)), SOURCES)
    assert shadowed != digest(package)


def shipped_file(tmp_path: Path, *records: Record) -> Path:
    path = tmp_path / "verified_releases.json"
    path.write_text(json.dumps({"records": [record.as_json() for record in records]}))
    return path


def test_a_shipped_record_is_found_for_its_version_and_sources_only(
    package: Path, tmp_path: Path
) -> None:
    roots = (str(package),)
    mine = Record("p", "0.5.23", digest(package), "CI", {"k": 1})
    other_version = Record("p", "0.5.22", digest(package), "CI", {"k": 2})
    shipped = shipped_file(tmp_path, mine, other_version)
    found = find_record("p", "0.5.23", SOURCES, shipped, roots)
    assert found is not None and found.facts == {"k": 1} and found.made_by == "CI"
    assert find_record("q", "0.5.23", SOURCES, shipped, roots) is None  # another patch's
    (package / "srt" / "server_args.py").write_text("ARGS = edited\n")
    fingerprint_at.cache_clear()
    assert find_record("p", "0.5.23", SOURCES, shipped, roots) is None


def test_no_record_for_the_version_means_no_hashing(tmp_path: Path) -> None:
    shipped = shipped_file(tmp_path, Record("p", "0.5.22", "x", "CI", {}))
    missing = (str(tmp_path / "nowhere"),)  # hashing would record these sources as absent
    fingerprint_at.cache_clear()
    assert find_record("p", "0.5.24.dev0", SOURCES, shipped, missing) is None
    assert fingerprint_at.cache_info().currsize == 0


def test_a_record_verify_wrote_is_found_and_never_overwritten(
    package: Path, tmp_path: Path, records: Path
) -> None:
    roots = (str(package),)
    record = Record("p", "0.5.24.dev0", digest(package), "verify on this machine", {"k": 1})
    path = write_record(record)
    assert path.parent == records
    assert write_record(record) == path  # the same facts again: nothing to do
    found = find_record("p", "0.5.24.dev0", SOURCES, tmp_path / "none.json", roots)
    assert found is not None and found.made_by == "verify on this machine"
    with pytest.raises(RecordConflict, match="delete it"):
        write_record(Record("p", "0.5.24.dev0", record.fingerprint, "verify", {"k": 2}))
    assert json.loads(path.read_text())["records"][0]["facts"] == {"k": 1}
    assert not list(records.glob("*.partial"))
