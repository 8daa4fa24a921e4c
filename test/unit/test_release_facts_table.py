"""The release facts: one row per tested release, found by the content of the SGLang sources
alone, whatever version string the build carries (the row made for this version first); a
shipped row comes before one ``verify`` kept; a kept cell is never overwritten by another; an
untested version whose sources are a tested release's is that release. The shipped table fits
on a screen and the patches' cells read back as they were written."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

import pytest

from sglang_nvfp4_patches import release_facts
from sglang_nvfp4_patches.llama4_router_weight import evidence as llama4
from sglang_nvfp4_patches.llama4_router_weight.rule import Part, Shown
from sglang_nvfp4_patches.nvfp4_moe_runner import evidence as moe
from sglang_nvfp4_patches.nvfp4_moe_runner.rule import EvidenceKey
from sglang_nvfp4_patches.release_facts import (
    KEPT_BY,
    RECORDS_ENV,
    SHIPPED_BY,
    FactsConflict,
    Row,
    find_row,
    fingerprint_at,
    keep,
    parse,
    render,
)
from sglang_nvfp4_patches.supported_releases import TESTED_RELEASES
from support.repo_scripts import load_script

SOURCES = ("srt/layers/moe", "srt/server_args.py")
SHIPPED_TEXT = release_facts.SHIPPED.read_text()


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
    assert len(before) == 16 and int(before, 16) >= 0
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


def test_an_absent_source_counts_the_same_from_any_directory(
    package: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A release without one of the sources has one fingerprint, wherever it is asked from,
    and another than a release where that source is an empty file."""
    (package / "srt" / "server_args.py").unlink()
    prints = set()
    for where in (tmp_path, package / "srt", package / "srt" / "layers"):
        monkeypatch.chdir(where)
        prints.add(digest(package))
    assert len(prints) == 1
    (package / "srt" / "server_args.py").write_text("")
    assert digest(package) not in prints


def table(*rows: Row) -> str:
    return render(("q",), rows)


@pytest.fixture
def shipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "release_facts.txt"
    monkeypatch.setattr(release_facts, "SHIPPED", path)
    return path


def test_a_row_is_found_by_its_sources_whatever_version_the_build_names(
    package: Path, shipped: Path
) -> None:
    other_release = Row("0.5.22", digest(package), {"q": "a"})
    mine = Row("0.5.23", digest(package), {"q": "a"})
    shipped.write_text(table(other_release, mine))
    assert find_row("0.5.23", digest(package)) == mine  # the one made for this version
    # a local, rc or post build with these sources: a row made for them
    for version in ("0.5.23+gabc123", "0.5.23rc1", "0.5.24.dev0"):
        assert find_row(version, digest(package)) in (mine, other_release)
    assert find_row("0.5.23", "0" * 16) is None  # other sources: no row


def test_a_shipped_row_comes_before_one_verify_kept(
    package: Path, shipped: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(release_facts, "fingerprint", lambda: digest(package))
    keep("0.5.23+gabc123", {"q": "kept"})
    shipped.write_text(table(Row("0.5.23", digest(package), {"q": "ci"})))
    found = find_row("0.5.23+gabc123", digest(package))
    assert found is not None and (found.made_by, found.release) == (SHIPPED_BY, "0.5.23")
    assert found.origin("0.5.23+gabc123") == (
        "recorded by CI for SGLang 0.5.23, whose sources this build has"
    )
    assert found.origin("0.5.23") == "recorded by CI for SGLang 0.5.23"


def test_a_kept_cell_is_found_merged_and_never_overwritten(
    package: Path, shipped: Path, records: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(release_facts, "fingerprint", lambda: digest(package))
    path = keep("0.5.24.dev0", {"a": "1"})
    assert path.parent == records
    text = path.read_text()
    assert keep("0.5.24.dev0", {"a": "1"}) == path and path.read_text() == text  # nothing new
    keep("0.5.24.dev0", {"b": "2"})  # another check's cells join the row
    found = find_row("0.5.24.dev0", digest(package))
    assert found is not None and found.made_by == KEPT_BY
    assert (found.cell("a"), found.cell("b")) == ("1", "2")
    with pytest.raises(FactsConflict, match="delete its row"):
        keep("0.5.24.dev0", {"a": "3"})
    assert find_row("0.5.24.dev0", digest(package)).cell("a") == "1"  # type: ignore[union-attr]
    assert not list(records.glob("*.partial"))


def _keep_columns(first: int) -> None:
    for column in range(first, first + 30):
        keep("0.5.24.dev0", {f"c{column}": "x"})


def test_checks_keeping_their_cells_at_once_lose_none(
    package: Path, shipped: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``verify`` runs each patch's checks in its own process, all at once."""
    monkeypatch.setattr(release_facts, "fingerprint", lambda: digest(package))
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_keep_columns, args=(i * 100,)) for i in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    found = find_row("0.5.24.dev0", digest(package))
    assert found is not None and len(found.cells) == 4 * 30


def test_a_cell_no_check_derived_yet_reads_as_none(package: Path, shipped: Path) -> None:
    shipped.write_text(render(("a", "b"), [Row("0.5.24", digest(package), {"a": "1"})]))
    found = find_row("0.5.24", digest(package))
    assert found is not None and (found.cell("a"), found.cell("b")) == ("1", None)


@pytest.mark.parametrize(
    ("release", "made_by", "expected"),
    [
        ("0.5.23", SHIPPED_BY, "0.5.23"),
        ("0.5.13", SHIPPED_BY, "0.5.13"),
        ("0.5.24.dev0", KEPT_BY, None),  # verify's: untested sources
        ("0.5.24", SHIPPED_BY, None),  # a shipped row of a release outside the window
        (None, None, None),  # no row
    ],
)
def test_an_untested_version_is_a_tested_release_only_by_a_shipped_row(
    release: str | None,
    made_by: str | None,
    expected: str | None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    row = None if release is None else Row(release, "f" * 16, {}, made_by or "")
    monkeypatch.setattr(release_facts, "current_row", lambda: row)
    assert release_facts.release_with_these_sources() == expected


def test_the_shipped_table_fits_on_a_screen_one_row_per_tested_release() -> None:
    lines = SHIPPED_TEXT.splitlines()
    assert len(lines) <= 40 and max(map(len, lines)) <= 160
    columns, rows = parse(SHIPPED_TEXT)
    assert [row.release for row in rows] == list(TESTED_RELEASES)
    assert all(set(row.cells) == set(columns) for row in rows)
    assert all(len(row.fingerprint) == 16 for row in rows)


def test_the_script_writes_the_table_back_byte_for_byte() -> None:
    columns, rows = parse(SHIPPED_TEXT)
    legend = "".join(line + "\n" for line in SHIPPED_TEXT.splitlines() if line.startswith("#"))
    assert render(columns, rows, legend) == SHIPPED_TEXT


def test_the_moe_cells_say_each_state_per_gpu_and_launch() -> None:
    """One hand-written fact per letter, read back where it was written."""
    written = {
        ("sm100", "no --quantization"): "live",
        ("sm100", "--quantization modelopt_fp4"): "live",
        ("sm100", "--quantization modelopt"): "no remedy",
        ("sm103", "no --quantization"): "upstream",
        ("sm120", "no --quantization"): "not affected",
        ("sm121", "no --quantization"): "not covered",
        ("sm121", "--quantization modelopt"): "unknown",
    }
    facts = {EvidenceKey("silu, top-1", *where): {"state": s} for where, s in written.items()}
    cells = moe.cells(facts)
    assert cells == {"moe:silu,top-1": "LLN/U../A../C.?"}
    read = moe.facts_of(Row("0.5.99", "f" * 16, cells))
    assert read is not None
    assert {key: fact["state"] for key, fact in read.items()} == {
        key: fact["state"] for key, fact in facts.items()
    }


def test_the_llama4_cells_say_each_part() -> None:
    facts = {Part.RUNNER: {"state": Shown.NOT_SHOWN}, Part.MODELOPT: {"state": Shown.LIFTED_WRONG}}
    cells = llama4.cells(facts)
    assert cells == {
        "l4:runner": "not-shown",
        "l4:modelopt": "lifted-wrong",
        "l4:compressed-tensors": "-",
    }
    read = llama4.facts_of(Row("0.5.99", "f" * 16, cells))
    assert read is not None
    assert read.shown == {Part.RUNNER: Shown.NOT_SHOWN, Part.MODELOPT: Shown.LIFTED_WRONG}


@pytest.mark.parametrize("row", parse(SHIPPED_TEXT)[1], ids=lambda row: row.release)
def test_every_shipped_cell_reads_back_as_written(row: Row) -> None:
    moe_facts = moe.facts_of(row)
    llama4_facts = llama4.facts_of(row)
    assert moe_facts is not None and llama4_facts is not None
    moe_cells = {c: v for c, v in row.cells.items() if c.startswith(moe.COLUMN)}
    assert moe.cells(moe_facts) == moe_cells
    llama4_cells = {c: v for c, v in row.cells.items() if c.startswith(llama4.COLUMN)}
    shown = {part: {"state": state} for part, state in llama4_facts.shown.items()}
    assert llama4.cells(shown) == llama4_cells


def test_no_kept_file_is_no_row(package: Path, shipped: Path) -> None:
    assert not os.path.exists(release_facts.records_dir() / release_facts.KEPT_NAME)
    assert find_row("0.5.23", digest(package)) is None


def test_the_script_keeps_gemma4s_cell_of_a_fingerprint_and_says_unknown_for_new_sources() -> None:
    """scripts/release_facts.py never derives ``gemma4:v-scale`` (reading proves no fix)."""
    script = load_script("release_facts")
    shipped = [Row("0.5.13", "a" * 16, {"gemma4:v-scale": "dropped", "l4:runner": "fails"})]
    same = {"fingerprint": "a" * 16, "cells": {"l4:runner": "upstream"}}
    row = script.row_of("0.5.13.post1", same, shipped)
    assert row.cells == {"gemma4:v-scale": "dropped", "l4:runner": "upstream"}
    new = {"fingerprint": "b" * 16, "cells": {"l4:runner": "upstream"}}
    assert script.row_of("0.5.24", new, shipped).cells["gemma4:v-scale"] == "unknown"
