"""MMLU from the Hugging Face Hub (``--data cais/mmlu``), tested offline on a local copy of a
dataset repository in cais/mmlu's layout, written with ``datasets`` (no network: the Hub is
switched off in every process that loads a dataset)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from accuracy_support import PYTHON_DIR
from accuracy_support.dataset_writer import WrittenQuestion, write_dataset
from accuracy_support.fake_server import FakeServer, Script
from sglang_nvfp4_patches.accuracy.dataset import questions_by_subject
from sglang_nvfp4_patches.accuracy.errors import DatasetError
from sglang_nvfp4_patches.cli import main

SIZES = {"anatomy": 7, "astronomy": 4, "virology": 5}


def _offline_env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(PYTHON_DIR), *sys.path]),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "HF_HOME": str(tmp_path / "hf-home"),  # no cache outside the test
    }


def _write_hub(root: Path, sizes: dict[str, int], env: dict[str, str]) -> None:
    """``write_hub_dataset`` in a fresh process, so ``datasets`` loads with the Hub off."""
    writer = (
        "import sys; from pathlib import Path; "
        "from accuracy_support.dataset_writer import write_hub_dataset as w; "
        f"w(Path(sys.argv[1]), {sizes!r})"
    )
    subprocess.run([sys.executable, "-c", writer, str(root)], env=env, check=True)


def _run_cli(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "sglang_nvfp4_patches", "accuracy", *argv]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture
def copies(tmp_path: Path) -> tuple[Path, Path, dict[str, WrittenQuestion]]:
    """The same questions as an MMLU csv folder and as a Hub dataset repository copy."""
    written = write_dataset(tmp_path / "csv", SIZES)
    _write_hub(tmp_path / "hub", SIZES, _offline_env(tmp_path))
    return tmp_path / "csv", tmp_path / "hub", written


def test_run_from_the_hub_layout_asks_the_csv_questions_with_the_same_ids(
    copies: tuple[Path, Path, dict[str, WrittenQuestion]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    csv_dir, hub_dir, written = copies
    env = _offline_env(tmp_path)
    replies = {qid: f" {q.answer}" for qid, q in written.items()}
    with FakeServer(Script(replies=replies)) as server:
        argv = ("run", "--base-url", server.url, "--no-progress", "--shots", "3")
        csv_run = ["accuracy", *argv, "--data", str(csv_dir), "--out", str(tmp_path / "csv.json")]
        assert main(csv_run) == 0
        capsys.readouterr()
        csv_prompts = dict(server.prompts)
        result = _run_cli(env, *argv, "--data", str(hub_dir), "--out", str(tmp_path / "hub.json"))
        assert result.returncode == 0, result.stderr
        hub_prompts = dict(server.prompts)
    hub_run = json.loads((tmp_path / "hub.json").read_text())
    csv_run = json.loads((tmp_path / "csv.json").read_text())
    assert hub_run["data_dir"] == str(hub_dir)
    assert [r["id"] for r in hub_run["records"]] == [r["id"] for r in csv_run["records"]]
    assert sorted(r["id"] for r in hub_run["records"]) == sorted(written)
    assert all(r["answer"] == written[r["id"]].answer for r in hub_run["records"])
    assert hub_run["accuracy"] == 1.0
    # Every question got the very prompt the csv layout gives it (dev shots included).
    assert hub_prompts == csv_prompts and len(hub_prompts) == len(written)

    runs = [str(tmp_path / "csv.json"), str(tmp_path / "hub.json")]
    assert main(["accuracy", "compare", "--json", *runs]) == 0
    compared = json.loads(capsys.readouterr().out)
    assert (compared["n"], compared["only_in_a"], compared["only_in_b"]) == (len(written), 0, 0)


def test_missing_dataset_is_one_clear_error(tmp_path: Path) -> None:
    result = _run_cli(
        _offline_env(tmp_path),
        *("run", "--data", "nobody-here/no-such-mmlu", "--out", str(tmp_path / "r.json")),
    )
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()[-1:]
    assert line.startswith(
        "error: --data nobody-here/no-such-mmlu: not a local MMLU csv folder, and loading it "
        "as a Hugging Face dataset (config 'all') failed: "
    )
    assert "Traceback" not in result.stderr


def test_hub_copy_without_the_mmlu_splits_is_a_clear_error(tmp_path: Path) -> None:
    hub, env = tmp_path / "hub", _offline_env(tmp_path)
    _write_hub(hub, {"a": 1}, env)
    readme = hub / "README.md"
    readme.write_text(readme.read_text().replace("split: dev", "split: validation"))
    result = _run_cli(env, "run", "--data", str(hub), "--out", str(tmp_path / "r.json"))
    assert result.returncode == 2
    assert "config 'all' has no split dev (has validation, test)" in result.stderr


def test_rows_get_per_subject_ids_in_row_order() -> None:
    rows = [
        {"question": "q0", "subject": "b", "choices": ["1", "2", "3", "4"], "answer": 3},
        {"question": "q1", "subject": "a", "choices": ["1", "2", "3", "4"], "answer": "b"},
        {"question": "q2", "subject": "b", "choices": ["1", "2", "3", "4"], "answer": 0},
    ]
    grouped = questions_by_subject(rows, "x (test)")
    assert {s: [(q.id, q.question, q.answer) for q in qs] for s, qs in grouped.items()} == {
        "b": [("b/0", "q0", "D"), ("b/1", "q2", "A")],
        "a": [("a/0", "q1", "B")],
    }


@pytest.mark.parametrize(
    ("row", "fragment"),
    [
        ({"question": "q", "subject": "s", "choices": ["1", "2", "3", "4"]}, "no column answer"),
        ({"question": "q", "subject": "s", "choices": ["1", "2"], "answer": 0}, "4 texts"),
        (
            {"question": "q", "subject": "s", "choices": ["1", "2", "3", "4"], "answer": 4},
            "'answer' must be 0-3 or A-D, found 4",
        ),
    ],
)
def test_malformed_rows_name_split_and_row(row: dict[str, object], fragment: str) -> None:
    with pytest.raises(DatasetError) as info:
        questions_by_subject([row], "cais/mmlu (test)")
    assert str(info.value).startswith("cais/mmlu (test) row 0: ")
    assert fragment in str(info.value)


def test_a_hub_id_without_network_fails_in_seconds_with_one_line(tmp_path: Path) -> None:
    """Once 25 s and 11 lines of the Hub library's retries; the Hub stands at a closed port."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(PYTHON_DIR), *sys.path]),
        "HF_ENDPOINT": "http://127.0.0.1:9",
        "HF_HOME": str(tmp_path / "hf-home"),  # nothing cached
    }
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HF_DATASETS_CACHE", "HF_HUB_CACHE"):
        env.pop(name, None)
    argv = ["accuracy", "run", "--data", "cais/mmlu", "--out", str(tmp_path / "r.json")]
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "sglang_nvfp4_patches", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    took = time.monotonic() - started
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        "error: --data cais/mmlu: the Hugging Face Hub is offline here (http://127.0.0.1:9 "
        "cannot be reached ([Errno 111] Connection refused)) and no copy of the dataset is "
        "cached: download it where there is network (or point HF_HOME at a cache that has "
        "it), or pass an MMLU csv folder"
    ]
    assert took < 15, took  # the library's own retries took 25 s
