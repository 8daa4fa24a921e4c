"""Read sgl-eval runs (``metrics.json``, ``output-rs<k>.jsonl``) for ``accuracy compare`` (pure).

Each repeat is one LoadedRun, paired repeat by repeat: pooling would count a question repeatedly.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sglang_nvfp4_patches.accuracy.compare import LoadedRun, load_run
from sglang_nvfp4_patches.accuracy.errors import CompareError, RunFileError
from sglang_nvfp4_patches.accuracy.files import read_bounded
from sglang_nvfp4_patches.errors import loads_json

REPEAT_FILE = re.compile(r"^output-rs(\d+)\.jsonl$")
# sgl-eval names a run sgl_eval_<bench>_<%Y%m%d-%H%M%S> (or a uuid hex as the stamp).
RUN_DIR = re.compile(r"^sgl_eval_(?P<bench>.+?)(?:_(?:\d{8}-\d{6}|[0-9a-f]{32}))?$")
# The binary per-sample score, first key present wins.
SCORE_KEYS: tuple[str, ...] = ("symbolic_correct", "is_correct")
# What metrics.json records that changes the answers: the benchmark, the sampling parameters
# (``gen``: temperature, top_p, max_tokens, chat_template_kwargs, system_message, seed, ...)
# and the code that builds prompts and scores them. Not the model or endpoint (what an A/B
# varies), nor counts, timings or throughput.
SETTING_KEYS: tuple[str, ...] = ("name", "gen", "sgl_eval_version", "ns_commit_sha")


def is_sgl_eval(path: Path) -> bool:
    """A run directory or one of its repeat files (anything else is our own run file)."""
    return path.is_dir() or REPEAT_FILE.match(path.name) is not None


def load_sgl_eval(path: Path, allow_partial: bool) -> dict[int, LoadedRun]:
    """Every repeat of a run directory, or the one repeat a file names, by repeat number."""
    run_dir = path if path.is_dir() else path.parent
    if not path.exists():
        raise RunFileError(f"{path}: no such file")
    candidates = run_dir.glob("output-rs*.jsonl") if path.is_dir() else [path]
    files = {int(match[1]): f for f in candidates if (match := REPEAT_FILE.match(f.name))}
    if not files:
        raise RunFileError(
            f"{path}: no output-rs<k>.jsonl in this directory; give an sgl-eval run directory "
            "(sgl_eval_<bench>_<stamp>/, written with per-sample predictions) or a run file"
        )
    metrics_path = run_dir / "metrics.json"
    try:
        metrics = loads_json(read_bounded(metrics_path))
    except FileNotFoundError:
        metrics = None
    except RunFileError:  # read_bounded's own refusal (a FIFO, too large), worded already
        raise
    except ValueError as exc:
        raise RunFileError(f"{metrics_path}: not readable JSON ({exc})") from None
    if metrics is not None and not isinstance(metrics, dict):
        raise RunFileError(f"{metrics_path}: not a JSON object; not an sgl-eval metrics file")
    complete = metrics is not None and metrics.get("partial") is not True
    if not complete and not allow_partial:
        problem = (
            "has no metrics.json (sgl-eval writes it when a run ends; was it killed?)"
            if metrics is None
            else "is a partial run (metrics.json says partial: true: it was stopped early)"
        )
        raise RunFileError(
            f"{run_dir} {problem}; its samples are not the whole benchmark, so comparing it "
            "could mislead: rerun it, or pass --allow-partial to compare the samples it has"
        )
    match = RUN_DIR.match(run_dir.name)  # the benchmark is the table's subject column
    bench = match.group("bench") if match else "all"
    settings = {key: (metrics or {}).get(key) for key in SETTING_KEYS}
    return {k: _load_repeat(files[k], bench, complete, settings) for k in sorted(files)}


def _load_repeat(path: Path, bench: str, complete: bool, settings: Mapping[str, Any]) -> LoadedRun:
    try:
        lines = read_bounded(path).split(b"\n")
    except FileNotFoundError:
        raise RunFileError(f"{path}: no such file") from None
    records: dict[str, Mapping[str, Any]] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            sample = loads_json(line)
        except ValueError as exc:
            if number == len(lines) and not complete:
                break  # the line a stopped run was writing
            raise RunFileError(f"{path}:{number}: not a JSON line ({exc})") from None
        record = _record(path, number, sample, bench)
        if record["id"] in records:
            raise RunFileError(f"{path}:{number}: duplicate id {record['id']!r} in one repeat")
        records[record["id"]] = record
    return LoadedRun(str(path), records, complete, settings)


def _record(path: Path, number: int, sample: object, bench: str) -> dict[str, Any]:
    """One scored sample as a compare record: id, subject and whether it was right."""
    where = f"{path}:{number}"
    if not isinstance(sample, dict):
        raise RunFileError(f"{where}: not a JSON object; not an sgl-eval sample line")
    qid = sample.get("id")
    if isinstance(qid, bool) or not isinstance(qid, (str, int)):
        raise RunFileError(
            f'{where}: no string or integer "id"; compare pairs samples by id (sgl-eval '
            "writes one per sample)"
        )
    key = next((k for k in SCORE_KEYS if k in sample), None)
    score = sample.get(key) if key else None
    if not (isinstance(score, bool) or score in (0, 1)):
        raise RunFileError(
            f"{where}: no binary score ({' or '.join(SCORE_KEYS)}: true/false); compare "
            "needs right/wrong per sample, which benchmarks scored another way do not give"
        )
    subject = sample.get("subject")
    return {
        "id": str(qid),
        "subject": subject if isinstance(subject, str) and subject else bench,
        "correct": bool(score),
    }


def paired_runs(
    path_a: Path, path_b: Path, allow_partial: bool = False
) -> list[tuple[LoadedRun, LoadedRun]]:
    """What ``compare`` tests: one pair, or one pair per repeat (rs<k> with rs<k>)."""
    a, b = (
        load_sgl_eval(path, allow_partial) if is_sgl_eval(path) else load_run(path)
        for path in (path_a, path_b)
    )
    _refuse_one_run_twice(path_a, path_b)
    repeats_a = a if isinstance(a, dict) else {0: a}
    repeats_b = b if isinstance(b, dict) else {0: b}
    if len(repeats_a) == len(repeats_b) == 1:
        return [(next(iter(repeats_a.values())), next(iter(repeats_b.values())))]
    if isinstance(a, dict) and isinstance(b, dict) and set(a) == set(b):
        return [(a[k], b[k]) for k in sorted(a)]
    example = next(iter(repeats_a.values())).label if path_a.is_dir() else str(path_a)
    raise RunFileError(
        f"A has {_repeats_text(repeats_a)} and B {_repeats_text(repeats_b)}: compare pairs "
        "two sgl-eval directories repeat by repeat only when both hold the same repeats; "
        f"name one file per side instead (e.g. {example})"
    )


def _refuse_one_run_twice(path_a: Path, path_b: Path) -> None:
    """A and B must be two runs, not one path twice nor two copies of one run file."""
    try:
        same = path_a.samefile(path_b)
    except OSError:  # pragma: no cover - both were just read
        return
    if same:
        raise CompareError(
            f"A and B are the same {'directory' if path_a.is_dir() else 'file'} ({path_a}): "
            "comparing a run with itself always finds no difference; give the two runs to "
            "compare"
        )
    if is_sgl_eval(path_a) or is_sgl_eval(path_b):
        return
    size_a, size_b = path_a.stat().st_size, path_b.stat().st_size
    if size_a == size_b and read_bounded(path_a) == read_bounded(path_b):
        raise CompareError(
            f"{path_a} and {path_b} have the same content, byte for byte: one is a copy of "
            "the other (a run file records when it ran), so comparing them always finds no "
            "difference; give the two runs to compare"
        )


def _repeats_text(repeats: dict[int, LoadedRun]) -> str:
    return f"{len(repeats)} repeat(s) ({', '.join(f'rs{k}' for k in sorted(repeats))})"
