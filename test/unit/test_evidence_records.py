"""Evidence records: found by the content of the SGLang sources they ran through, whatever
version they were made for (the one made for this version first); a shipped record and one
``verify`` wrote are both found, the shipped one first; a record is never overwritten by a
different one; an untested version whose records are all CI's for one tested release is
that release."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sglang_nvfp4_patches.evidence_records import (
    KEPT_BY,
    RECORDS_ENV,
    SHIPPED_BY,
    Record,
    RecordConflict,
    find_record,
    fingerprint_at,
    release_with_these_sources,
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


def test_a_shipped_record_is_found_by_its_sources_whatever_version_it_names(
    package: Path, tmp_path: Path
) -> None:
    roots = (str(package),)
    other_release = Record("p", "0.5.22", digest(package), "CI", {"k": 2})
    mine = Record("p", "0.5.23", digest(package), "CI", {"k": 1})
    shipped = shipped_file(tmp_path, other_release, mine)
    found = find_record("p", "0.5.23", SOURCES, shipped, roots)
    assert found == mine  # of two made for these sources, the one made for this version
    # a local or post build with these sources: the first record made for them
    assert find_record("p", "0.5.23+gabc123", SOURCES, shipped, roots) == other_release
    assert find_record("p", "0.5.23.post1", SOURCES, shipped, roots) == other_release
    assert find_record("q", "0.5.23", SOURCES, shipped, roots) is None  # another patch's
    (package / "srt" / "server_args.py").write_text("ARGS = edited\n")
    fingerprint_at.cache_clear()
    assert find_record("p", "0.5.23", SOURCES, shipped, roots) is None
    assert find_record("p", "0.5.23+gabc123", SOURCES, shipped, roots) is None


def test_a_shipped_record_comes_before_one_verify_kept(package: Path, tmp_path: Path) -> None:
    roots = (str(package),)
    write_record(Record("p", "0.5.23+gabc123", digest(package), KEPT_BY, {"k": 0}))
    shipped = shipped_file(tmp_path, Record("p", "0.5.23", digest(package), SHIPPED_BY, {}))
    found = find_record("p", "0.5.23+gabc123", SOURCES, shipped, roots)
    assert found is not None and found.made_by == SHIPPED_BY and found.sglang == "0.5.23"


def test_the_origin_names_the_release_a_record_was_made_for() -> None:
    record = Record("p", "0.5.23", "f", SHIPPED_BY, {})
    assert record.origin("0.5.23") == "recorded by CI for SGLang 0.5.23"
    assert record.origin("0.5.23+gabc123") == (
        "recorded by CI for SGLang 0.5.23, whose sources this build has"
    )


def test_no_record_of_the_patch_means_no_hashing(tmp_path: Path) -> None:
    shipped = shipped_file(tmp_path, Record("q", "0.5.22", "x", "CI", {}))
    missing = (str(tmp_path / "nowhere"),)  # hashing would record these sources as absent
    fingerprint_at.cache_clear()
    assert find_record("p", "0.5.24.dev0", SOURCES, shipped, missing) is None
    assert fingerprint_at.cache_info().currsize == 0
    assert find_record("q", "0.5.24.dev0", SOURCES, shipped, missing) is None
    assert fingerprint_at.cache_info().currsize == 1


def shipped_for(release: str) -> Record:
    return Record("p", release, "f", SHIPPED_BY, {})


@pytest.mark.parametrize(
    ("records", "release"),
    [
        ([shipped_for("0.5.23"), shipped_for("0.5.23")], "0.5.23"),
        ([shipped_for("0.5.13")], "0.5.13"),
        ([shipped_for("0.5.23"), None], None),  # one patch finds no record for these sources
        ([shipped_for("0.5.23"), shipped_for("0.5.22")], None),  # not one release's
        ([shipped_for("0.5.23"), Record("q", "0.5.23", "f", KEPT_BY, {})], None),
        ([Record("p", "0.5.24.dev0", "f", KEPT_BY, {})], None),  # verify's: untested sources
        ([shipped_for("0.5.24")], None),  # a shipped record of a release outside the window
        ([], None),
    ],
)
def test_an_untested_version_is_a_tested_release_only_where_all_its_records_are_cis(
    records: list[Record | None], release: str | None
) -> None:
    assert release_with_these_sources(iter(records)) == release


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
