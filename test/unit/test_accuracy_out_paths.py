"""``accuracy run --out`` that cannot be written fails with one line before any question."""

from __future__ import annotations

from pathlib import Path

import pytest

from accuracy_support.dataset_writer import write_dataset
from accuracy_support.fake_server import FakeServer, Script
from sglang_nvfp4_patches.cli import main


@pytest.mark.parametrize("where", ["under-file", "directory", "not-writable"])
def test_an_unusable_out_is_one_line_and_no_question_is_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    write_dataset(tmp_path / "mmlu", {"anatomy": 3})
    blocker = tmp_path / "a-file"
    blocker.write_text("keep me")
    out, says = {
        "under-file": (blocker / "run.json", f"lies under {blocker}, which is a file"),
        "directory": (tmp_path, "is a directory, not a regular file"),
        # /sys refuses new entries even to root (EPERM), as a read-only mount would
        "not-writable": (Path("/sys/sglang-nvfp4-run-test/run.json"), "cannot write there"),
    }[where]
    with FakeServer(Script(replies={})) as server:
        code = main(
            [
                *("accuracy", "run", "--base-url", server.url),
                *("--data", str(tmp_path / "mmlu"), "--out", str(out)),
            ]
        )
        calls = sum(server.calls.values())
    captured = capsys.readouterr()
    assert (code, captured.out, calls) == (2, "", 0)
    assert captured.err.startswith(f"error: --out {out}: ") and says in captured.err
    assert len(captured.err.splitlines()) == 1
    assert blocker.read_text() == "keep me"
