"""Every path a user gives that the OS refuses is one ``error:`` line naming it, exit 2 (bad
input, README's exit table), never 70; nothing is created that the user did not ask for."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from accuracy_support.dataset_writer import write_dataset
from sglang_nvfp4_patches.cli import main

# One component longer than any file system's NAME_MAX (255): ENAMETOOLONG.
LONG = "n" * 300


def _commands(tmp_path: Path) -> dict[str, tuple[list[str], str]]:
    data = str(tmp_path / "mmlu")
    long = str(tmp_path / LONG)
    url = ("--base-url", "http://127.0.0.1:9")  # nothing answers: no question may be asked
    return {
        "explain --model": (["explain", "--model", long], long),
        "run --out": (["accuracy", "run", *url, "--data", data, "--out", long + "/x.json"], long),
        "run --data": (
            ["accuracy", "run", *url, "--data", long, "--out", str(tmp_path / "r")],
            long,
        ),
        "compare A": (["accuracy", "compare", long, data], long),
        "compare B": (["accuracy", "compare", data, long], long),
        "ab --model-path": (["accuracy", "ab", "--model-path", long, "--data", data], long),
        "ab --out-dir": (
            ["accuracy", "ab", "--model-path", "m", "--data", data, "--out-dir", long],
            long,
        ),
    }


@pytest.mark.parametrize(
    "case",
    [
        "explain --model",
        "run --out",
        "run --data",
        "compare A",
        "compare B",
        "ab --model-path",
        "ab --out-dir",
    ],
)
def test_a_too_long_path_is_bad_input_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    monkeypatch.chdir(tmp_path)  # ab's default --out-dir would land here, not in the repo
    write_dataset(tmp_path / "mmlu", {"anatomy": 2})
    before = sorted(p.name for p in tmp_path.iterdir())
    argv, named = _commands(tmp_path)[case]
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("error: ") and named in err and "too long" in err, err
    assert len(err.splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing created


def test_out_into_a_missing_directory_is_refused_naming_it_and_nothing_is_made(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_dataset(tmp_path / "mmlu", {"anatomy": 2})
    missing = tmp_path / "no" / "such"
    code = main(
        [
            "accuracy",
            "run",
            "--base-url",
            "http://127.0.0.1:9",
            "--data",
            str(tmp_path / "mmlu"),
            "--out",
            str(missing / "x.json"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and f"the directory {missing} does not exist" in err, err
    assert not (tmp_path / "no").exists()


def test_out_dir_under_a_missing_parent_is_refused_and_nothing_is_made(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_dataset(tmp_path / "mmlu", {"anatomy": 2})
    missing = tmp_path / "no" / "ab"
    code = main(
        [
            "accuracy",
            "ab",
            "--model-path",
            "m",
            "--data",
            str(tmp_path / "mmlu"),
            "--out-dir",
            str(missing),
            "--launcher",
            "false",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and f"the directory {missing.parent} does not exist" in err, err
    assert not (tmp_path / "no").exists()


def test_a_path_in_a_directory_without_search_permission_is_bad_input(tmp_path: Path) -> None:
    """Root searches any directory, so there the command runs without the capabilities that
    let it (``setpriv``): the OS refuses the path as it refuses any other user."""
    locked = tmp_path / "locked"
    (locked / "m").mkdir(parents=True)
    locked.chmod(0)
    drop = "-dac_override,-dac_read_search"
    as_a_user = ["setpriv", "--bounding-set", drop, "--inh-caps", drop] if os.geteuid() == 0 else []
    command = [*as_a_user, sys.executable, "-m", "sglang_nvfp4_patches"]
    try:
        done = subprocess.run(
            [*command, "explain", "--model", str(locked / "m")],
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        locked.chmod(0o700)
    assert done.returncode == 2, done.stderr
    assert str(locked / "m") in done.stderr and "Permission denied" in done.stderr, done.stderr


@pytest.mark.parametrize("model", ["/no/such/checkpoint", "./missing", "~/no-such-model-dir"])
def test_ab_refuses_a_local_model_path_that_does_not_exist_before_any_launch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], model: str
) -> None:
    """Once ab started a real SGLang on such a path and exited 3 with its traceback."""
    launched = tmp_path / "launched"
    with pytest.raises(SystemExit) as refused:
        main(
            [
                "accuracy",
                "ab",
                "--model-path",
                model,
                "--data",
                str(tmp_path),
                "--out-dir",
                str(tmp_path / "ab"),
                "--launcher",
                f"touch {launched}",
            ]
        )
    assert refused.value.code == 2 and not launched.exists()
    assert f"argument --model-path: {model}: No such file" in capsys.readouterr().err
