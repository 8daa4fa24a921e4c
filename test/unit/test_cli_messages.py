"""What the command line says about its own input: GPU names, empty paths, numbers, the
usage shown for an unknown option, and the lines of a run that stopped early (in-process,
no SGLang import)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sglang_nvfp4_patches.accuracy.report import run_notes
from sglang_nvfp4_patches.accuracy.run import RunOutcome
from sglang_nvfp4_patches.cli import build_parser, main
from sglang_nvfp4_patches.errors import EXIT_SERVER, EXIT_USAGE

# What each GPU is, from NVIDIA's compute-capability table (not from our profiles).
GPU_NAMES = {
    "h100": (9, 0),
    "H200": (9, 0),
    "b200": (10, 0),
    "GB200": (10, 0),
    "B300": (10, 3),
    "gb300": (10, 3),
    "rtx-pro-6000": (12, 0),
    "RTX-PRO-6000": (12, 0),
    "SM100": (10, 0),
    "sm120": (12, 0),
    "sm121": (12, 1),
    "gb10": (12, 1),  # the DGX Spark's GB10
    "DGX-Spark": (12, 1),
}


@pytest.mark.parametrize(("name", "capability"), sorted(GPU_NAMES.items()))
def test_gpu_takes_the_gpus_name_in_any_case(name: str, capability: tuple[int, int]) -> None:
    from sglang_nvfp4_patches.simulation.gpus import GPU_PROFILES

    args, _ = build_parser().parse_known_args(["explain", "--gpu", name])
    assert GPU_PROFILES[args.gpu].capability == capability


def _usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> list[str]:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == EXIT_USAGE
    return capsys.readouterr().err.splitlines()


def test_an_unknown_gpu_names_what_gpu_takes(capsys: pytest.CaptureFixture[str]) -> None:
    err = _usage_error(["explain", "--gpu", "sm110"], capsys)
    assert err[-1].endswith(
        "argument --gpu: unknown GPU 'sm110'; choose from sm90 (h100, h200), sm100 (b200, "
        "gb200), sm103 (b300, gb300), sm120 (rtx-pro-6000), sm121 (gb10, dgx-spark)"
    )


@pytest.mark.parametrize(
    ("argv", "usage", "unknown"),
    [
        (["doctor", "--gpu", "x"], "doctor", "--gpu"),
        (
            ["accuracy", "run", "--data", "d", "--out", "o", "--model-path", "x"],
            "accuracy run",
            "--model-path",
        ),
        (["verify", "--nope"], "verify", "--nope"),
    ],
)
def test_an_unknown_option_shows_the_usage_of_its_command(
    argv: list[str], usage: str, unknown: str, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _usage_error(argv, capsys)
    assert err[0].startswith("usage: ") and f" {usage} [-h]" in err[0], err
    assert err[-1].endswith(f" {usage}: error: unrecognized arguments: {unknown}"), err


@pytest.mark.parametrize(
    "argv",
    [
        ["accuracy", "run", "--data", "d", "--out", ""],
        ["accuracy", "ab", "--model-path", "m", "--data", "d", "--out-dir", ""],
        ["accuracy", "compare", "", "b.json"],
        ["explain", "--model", ""],
    ],
)
def test_an_empty_path_is_refused_as_empty(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Once ``--out ''`` was echoed as ``--out .``, a directory nobody gave."""
    err = _usage_error(argv, capsys)
    assert err[-1].endswith(": is empty; give a path") and "." not in err[-1].split(":")[-2]


@pytest.mark.parametrize(
    ("option", "kind"), [("--parallel", "an integer"), ("--timeout", "a number")]
)
def test_a_number_that_is_not_one_is_named_in_words(
    option: str, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _usage_error(["accuracy", "run", "--data", "d", "--out", "o", option, "x"], capsys)
    assert err[-1].endswith(f"argument {option}: expected {kind}, got 'x'")


def _stopped(failures: int, answered: int) -> RunOutcome:
    run = {"accuracy": None if answered == 0 else 0.9, "n_answered": answered}
    return RunOutcome(
        run=run,
        partial=Path("run.json.partial.jsonl"),
        resumed=0,
        failures=[(f"s/{n}", "HTTP 503") for n in range(failures)],
        not_attempted=1000,
        aborted=True,
        interrupted=False,
    )


def test_an_early_stop_counts_the_failures_in_a_row_as_the_docs_do() -> None:
    """Once "stopped after 113 failures" where the docs say 50: 63 more were in flight."""
    outcome = _stopped(failures=113, answered=7)
    assert outcome.exit_code == EXIT_SERVER
    stop = next(line for line in run_notes(outcome) if "stopped after" in line)
    assert stop.startswith(
        "ERROR: stopped after 50 failures in a row, without a success in between (63 more "
        "already asked failed too); 1000 question(s) not attempted"
    )
    assert run_notes(outcome)[-1] == (
        "the 7 answer(s) so far are kept in run.json.partial.jsonl; rerun to ask the rest"
    )


def test_a_run_without_answers_does_not_say_they_are_kept() -> None:
    notes = run_notes(_stopped(failures=50, answered=0))
    assert notes[-1] == "no answer was received, so none is kept; rerun to ask the rest"
    assert not any("more already asked" in line for line in notes)
