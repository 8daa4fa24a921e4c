"""``accuracy compare`` reading sgl-eval runs, at the edges: what each damaged file is told,
integer scores, subjects, blank lines, repeat order, and sides that do not pair (no SGLang
import). Found by ``scripts/mutation.sh``; runs are written here in sgl-eval's layout."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sglang_nvfp4_patches.accuracy.compare import compare_runs, load_sgl_eval, paired_runs
from sglang_nvfp4_patches.accuracy.errors import RunFileError
from sglang_nvfp4_patches.accuracy.store import RUN_FORMAT, RUN_VERSION, write_json_atomic

FINISHED = {"partial": False}


def sgl_eval_run(
    root: Path, name: str, repeats: dict[int, list[str]], metrics: object = FINISHED
) -> Path:
    """A run directory holding ``output-rs<k>.jsonl`` with the given lines per repeat."""
    run = root / name
    run.mkdir(parents=True)
    for repeat, lines in repeats.items():
        (run / f"output-rs{repeat}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    if metrics is not None:
        (run / "metrics.json").write_text(json.dumps(metrics), encoding="utf-8")
    return run


def our_run(path: Path, **meta: object) -> Path:
    """A run file as ``accuracy run`` writes it, holding one right answer to question ``a``."""
    record = {"id": "a", "subject": "s", "answer": "A", "correct": True, "prediction": "A"}
    write_json_atomic(
        path, {"format": RUN_FORMAT, "version": RUN_VERSION, **meta, "records": [record]}
    )
    return path


def sample(qid: object, score: object = True, **extra: object) -> str:
    return json.dumps({"id": qid, "symbolic_correct": score, **extra})


def loaded(run: Path, allow_partial: bool = False) -> dict[str, dict[str, object]]:
    ((_, repeat),) = load_sgl_eval(run, allow_partial).items()
    return {qid: dict(record) for qid, record in repeat.records.items()}


def test_integer_scores_subjects_and_blank_lines(tmp_path: Path) -> None:
    run = sgl_eval_run(
        tmp_path,
        "sgl_eval_mmlu_20260101-120000",
        {0: [sample(1, 1), "", sample(2, 0, subject="algebra"), sample(3, True, subject="")]},
    )
    assert loaded(run) == {
        "1": {"id": "1", "subject": "mmlu", "correct": True},
        "2": {"id": "2", "subject": "algebra", "correct": False},
        "3": {"id": "3", "subject": "mmlu", "correct": True},
    }


def test_a_directory_not_named_as_sgl_eval_names_it_is_benchmark_all(tmp_path: Path) -> None:
    run = sgl_eval_run(tmp_path, "my-run", {0: [sample("a")]})
    assert loaded(run)["a"]["subject"] == "all"


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ([sample("a"), "[1, 2]"], "{path}:2: not a JSON object; not an sgl-eval sample line"),
        (
            [sample("a", 0.5)],
            "{path}:1: no binary score (symbolic_correct or is_correct: true/false); compare "
            "needs right/wrong per sample, which benchmarks scored another way do not give",
        ),
        (
            [sample(None)],
            '{path}:1: no string or integer "id"; compare pairs samples by id (sgl-eval writes '
            "one per sample)",
        ),
        ([sample("a"), "{torn", sample("b")], None),
    ],
    ids=["not-an-object", "no-binary-score", "no-id", "a-torn-line-not-last"],
)
def test_a_damaged_sample_is_named_by_file_and_line(
    tmp_path: Path, lines: list[str], message: str | None
) -> None:
    run = sgl_eval_run(tmp_path, "sgl_eval_gsm8k", {0: lines}, metrics={"partial": True})
    path = run / "output-rs0.jsonl"
    with pytest.raises(RunFileError) as refused:
        load_sgl_eval(run, allow_partial=True)
    if message is None:
        assert str(refused.value).startswith(f"{path}:2: not a JSON line (")
    else:
        assert str(refused.value) == message.format(path=path)


@pytest.mark.parametrize(
    ("metrics", "problem"),
    [
        (None, "has no metrics.json (sgl-eval writes it when a run ends; was it killed?)"),
        (
            {"partial": True},
            "is a partial run (metrics.json says partial: true: it was stopped early)",
        ),
    ],
    ids=["no-metrics", "partial"],
)
def test_an_unfinished_run_is_refused_unless_allowed(
    tmp_path: Path, metrics: object, problem: str
) -> None:
    run = sgl_eval_run(tmp_path, "sgl_eval_gsm8k", {0: [sample("a")]}, metrics=metrics)
    other = sgl_eval_run(tmp_path, "sgl_eval_gsm8k_b", {0: [sample("a", False)]})
    with pytest.raises(RunFileError) as refused:
        paired_runs(run, other)
    assert str(refused.value) == (
        f"{run} {problem}; its samples are not the whole benchmark, so comparing it could "
        "mislead: rerun it, or pass --allow-partial to compare the samples it has"
    )
    ((a, b),) = paired_runs(run, other, allow_partial=True)
    assert not a.complete and compare_runs(a, b).incomplete == [a.label]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[1]", "{path}: not a JSON object; not an sgl-eval metrics file"),
        ("{oops", "{path}: not readable JSON ("),
    ],
)
def test_a_damaged_metrics_file_is_named(tmp_path: Path, text: str, message: str) -> None:
    run = sgl_eval_run(tmp_path, "sgl_eval_gsm8k", {0: [sample("a")]}, metrics=None)
    (run / "metrics.json").write_text(text, encoding="utf-8")
    with pytest.raises(RunFileError) as refused:
        load_sgl_eval(run, allow_partial=False)
    assert str(refused.value).startswith(message.format(path=run / "metrics.json"))


def test_missing_and_unreadable_paths_are_named(tmp_path: Path) -> None:
    with pytest.raises(RunFileError) as missing:
        load_sgl_eval(tmp_path / "gone", allow_partial=False)
    assert str(missing.value) == f"{tmp_path / 'gone'}: no such file"
    empty = tmp_path / "sgl_eval_gsm8k"
    empty.mkdir()
    with pytest.raises(RunFileError) as no_repeats:
        load_sgl_eval(empty, allow_partial=False)
    assert str(no_repeats.value) == (
        f"{empty}: no output-rs<k>.jsonl in this directory; give an sgl-eval run directory "
        "(sgl_eval_<bench>_<stamp>/, written with per-sample predictions) or a run file"
    )
    folder = sgl_eval_run(tmp_path, "sgl_eval_x", {}) / "output-rs0.jsonl"
    folder.mkdir()
    with pytest.raises(RunFileError) as unreadable:
        load_sgl_eval(folder.parent, allow_partial=False)
    assert str(unreadable.value) == (
        f"{folder}: is a directory, not a regular file; give the path of a run file"
    )
    dangling = sgl_eval_run(tmp_path, "sgl_eval_y", {}) / "output-rs0.jsonl"
    dangling.symlink_to(tmp_path / "moved-away.jsonl")  # listed in the directory, not there
    with pytest.raises(RunFileError) as gone:
        load_sgl_eval(dangling.parent, allow_partial=False)
    assert str(gone.value) == f"{dangling}: no such file"


def test_sides_that_do_not_pair_name_their_repeats_and_an_example(tmp_path: Path) -> None:
    many = sgl_eval_run(tmp_path, "sgl_eval_gsm8k_a", {10: [sample("a")], 2: [sample("a")]})
    ours = our_run(tmp_path / "RUN.json", complete=True)
    with pytest.raises(RunFileError) as from_dir:
        paired_runs(many, ours)
    assert str(from_dir.value) == (
        "A has 2 repeat(s) (rs2, rs10) and B 1 repeat(s) (rs0): compare pairs two sgl-eval "
        "directories repeat by repeat only when both hold the same repeats; name one file per "
        f"side instead (e.g. {many / 'output-rs2.jsonl'})"
    )
    with pytest.raises(RunFileError) as from_file:
        paired_runs(ours, many)
    assert str(from_file.value) == (
        "A has 1 repeat(s) (rs0) and B 2 repeat(s) (rs2, rs10): compare pairs two sgl-eval "
        "directories repeat by repeat only when both hold the same repeats; name one file per "
        f"side instead (e.g. {ours})"
    )


def test_our_run_file_pairs_with_a_single_repeat(tmp_path: Path) -> None:
    one = sgl_eval_run(tmp_path, "sgl_eval_gsm8k", {0: [sample("a", False)]})
    ours = our_run(tmp_path / "RUN.json")
    ((a, b),) = paired_runs(ours, one)
    assert (a.label, b.label) == (str(ours), str(one / "output-rs0.jsonl"))
    assert compare_runs(a, b).test.b == 1
