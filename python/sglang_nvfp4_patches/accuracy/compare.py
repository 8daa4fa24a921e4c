"""``accuracy compare``: paired comparison of two runs with McNemar's test (pure).

b = A right / B wrong, c = A wrong / B right: exact p below 25 pairs, else chi-square (no scipy).
A side is a run file of ours or an sgl-eval run (``metrics.json``, ``output-rs<k>.jsonl``): each
repeat is one LoadedRun, paired repeat by repeat, since pooling would count a question repeatedly.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sglang_nvfp4_patches.accuracy.errors import CompareError, RunFileError
from sglang_nvfp4_patches.accuracy.files import read_bounded
from sglang_nvfp4_patches.accuracy.store import (
    check_run_document,
    record_problem,
    setting_differences,
)
from sglang_nvfp4_patches.errors import EXIT_FAILED, EXIT_OK, loads_json

EXACT_TEST_BELOW = 25  # b + c below this: exact binomial test
# What a run file records that changes the answers themselves, so two runs must agree on it
# for a difference to be the servers'. Not ``model`` or ``server``: those are what an A/B
# varies; not the question set (``--subjects``, ``--limit``): pairing uses shared ids.
ANSWER_SETTINGS: tuple[str, ...] = ("api", "shots", "max_new_tokens")


@dataclass(frozen=True)
class McNemar:
    """Discordant counts, the corrected statistic and the p-value with its method."""

    b: int
    c: int
    chi2: float
    p_value: float
    method: str  # "exact-binomial" or "chi2-continuity-corrected"

    def significant(self, alpha: float) -> bool:
        """A difference between A and B at level ``alpha``."""
        return self.p_value < alpha and self.b != self.c


def chi2_sf_1dof(x: float) -> float:
    """P(X >= x) for a chi-square variable with one degree of freedom (X = Z^2)."""
    return 1.0 if x <= 0 else math.erfc(math.sqrt(x / 2))


def exact_binomial_p(b: int, c: int) -> float:
    """Two-sided exact p for b ~ Binomial(b + c, 1/2): twice the smaller tail, capped at 1."""
    n = b + c  # n = 0: a tail of 1 out of 1, so p = 1
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1))
    return min(1.0, 2 * tail / 2**n)


def mcnemar(b: int, c: int) -> McNemar:
    n = b + c
    chi2 = 0.0 if n == 0 else (abs(b - c) - 1) ** 2 / n
    if n < EXACT_TEST_BELOW:
        return McNemar(b, c, chi2, exact_binomial_p(b, c), "exact-binomial")
    return McNemar(b, c, chi2, chi2_sf_1dof(chi2), "chi2-continuity-corrected")


@dataclass(frozen=True)
class SubjectDelta:
    subject: str
    n: int
    acc_a: float
    acc_b: float

    @property
    def delta(self) -> float:
        return self.acc_b - self.acc_a


@dataclass(frozen=True)
class Comparison:
    """Result of ``compare``; ``to_json`` is the ``--json`` output."""

    label_a: str
    label_b: str
    n: int
    acc_a: float
    acc_b: float
    test: McNemar
    alpha: float
    verdict: str
    only_in_a: int
    only_in_b: int
    per_subject: list[SubjectDelta]
    incomplete: list[str]
    setting_differences: list[str] = field(default_factory=list)  # allowed by the user
    cut_outputs: dict[str, int] = field(default_factory=dict)  # answers stored cut, per side

    @property
    def b_is_worse(self) -> bool:
        """B answers significantly worse than A: what ``ab`` and ``compare`` exit 1 for."""
        return self.test.significant(self.alpha) and self.test.b > self.test.c

    def to_json(self) -> dict[str, Any]:
        return {
            "file_a": self.label_a,
            "file_b": self.label_b,
            "n": self.n,
            "acc_a": self.acc_a,
            "acc_b": self.acc_b,
            "delta": self.acc_b - self.acc_a,
            "b": self.test.b,
            "c": self.test.c,
            "mcnemar_chi2": self.test.chi2,
            "p_value": self.test.p_value,
            "p_method": self.test.method,
            "alpha": self.alpha,
            "verdict": self.verdict,
            "only_in_a": self.only_in_a,
            "only_in_b": self.only_in_b,
            "incomplete": self.incomplete,
            "setting_differences": self.setting_differences,
            "cut_outputs": self.cut_outputs,
            "per_subject": {
                d.subject: {"n": d.n, "acc_a": d.acc_a, "acc_b": d.acc_b, "delta": d.delta}
                for d in self.per_subject
            },
        }


@dataclass(frozen=True)
class LoadedRun:
    """Records of one run by id, whether it finished, and the settings that change answers."""

    label: str
    records: dict[str, Mapping[str, Any]]
    complete: bool
    settings: Mapping[str, Any] = field(default_factory=dict)


def load_run(path: Path) -> LoadedRun:
    """Read and validate a RUN.json; problems raise RunFileError naming the file."""
    try:
        raw = read_bounded(path)
    except FileNotFoundError:
        raise RunFileError(f"{path}: no such file") from None
    try:
        data = loads_json(raw)
    except ValueError as exc:
        raise RunFileError(f"{path}: not readable JSON ({exc})") from exc
    return run_from_document(str(path), check_run_document(path, data))


def run_from_document(label: str, data: Mapping[str, Any]) -> LoadedRun:
    """A run file's content as a LoadedRun; each record must be well formed and unique."""
    records: dict[str, Mapping[str, Any]] = {}
    for position, record in enumerate(data["records"]):
        problem = record_problem(record)
        if problem is not None:
            raise RunFileError(f"{label}: records[{position}] {problem}: restore it or run again")
        if record["id"] in records:
            raise RunFileError(f"{label}: duplicate record id {record['id']!r}")
        records[record["id"]] = record
    settings = {key: data.get(key) for key in ANSWER_SETTINGS}
    return LoadedRun(label, records, data.get("complete") is not False, settings)


def verdict_text(test: McNemar, alpha: float) -> str:
    p = f"p={test.p_value:.4g}, alpha={alpha:g}"
    if test.significant(alpha):
        direction = "worse" if test.b > test.c else "better"
        return f"B is significantly {direction} than A ({p})"
    return f"no significant difference between A and B ({p})"


def compare_runs(
    a: LoadedRun,
    b: LoadedRun,
    alpha: float = 0.05,
    allow_different_settings: bool = False,
) -> Comparison:
    """Pair by id over the shared questions; refuse differing settings and answer keys."""
    differences = setting_differences(
        a.settings, b.settings, sorted({*a.settings, *b.settings}), ("A", "B")
    )
    if differences and not allow_different_settings:
        raise CompareError(
            f"{a.label} and {b.label} were run with different settings "
            f"({'; '.join(differences)}): their answers differ for that reason too, so the test "
            "would not measure the servers alone. Rerun one side with the other's settings, or "
            "pass --allow-different-settings to compare them anyway"
        )
    shared = [qid for qid in a.records if qid in b.records]
    if not shared:
        raise CompareError(
            f"{a.label} and {b.label} share no question ids "
            f"({len(a.records)} vs {len(b.records)} records); were they run on the same data?"
        )
    for qid in shared:  # a shared id must be the same question: the same answer key
        key_a, key_b = a.records[qid].get("answer"), b.records[qid].get("answer")
        if key_a is not None and key_b is not None and key_a != key_b:
            raise CompareError(
                f"question {qid} has answer key {key_a} in {a.label} but {key_b} in {b.label}: "
                "the runs used different data, so pairing them by id would pair different "
                "questions"
            )
    rights = [(a.records[qid]["correct"], b.records[qid]["correct"]) for qid in shared]
    by_subject: dict[str, list[int]] = {}
    for qid, (right_a, right_b) in zip(shared, rights, strict=True):
        counts = by_subject.setdefault(a.records[qid]["subject"], [0, 0, 0])
        counts[0] += 1
        counts[1] += right_a
        counts[2] += right_b
    test = mcnemar(sum(ra > rb for ra, rb in rights), sum(rb > ra for ra, rb in rights))
    n = len(shared)
    return Comparison(
        label_a=a.label,
        label_b=b.label,
        n=n,
        acc_a=sum(ra for ra, _ in rights) / n,
        acc_b=sum(rb for _, rb in rights) / n,
        test=test,
        alpha=alpha,
        verdict=verdict_text(test, alpha),
        only_in_a=len(a.records) - n,
        only_in_b=len(b.records) - n,
        per_subject=[
            SubjectDelta(subject, cnt, ra / cnt, rb / cnt)
            for subject, (cnt, ra, rb) in sorted(by_subject.items())
        ],
        incomplete=[run.label for run in (a, b) if not run.complete],
        setting_differences=differences,
        cut_outputs={
            side: sum("output_cut" in record for record in run.records.values())
            for side, run in (("A", a), ("B", b))
        },
    )


def verdict_exit_code(comparisons: Sequence[Comparison]) -> int:
    """1 when a comparison finds B significantly worse than A (any repeat), else 0."""
    return EXIT_FAILED if any(c.b_is_worse for c in comparisons) else EXIT_OK


REPEAT_FILE = re.compile(r"^output-rs(\d+)\.jsonl$")
# sgl-eval names a run sgl_eval_<bench>_<%Y%m%d-%H%M%S> (or a uuid hex as the stamp).
RUN_DIR = re.compile(r"^sgl_eval_(?P<bench>.+?)(?:_(?:\d{8}-\d{6}|[0-9a-f]{32}))?$")
# The binary per-sample score, first key present wins.
SCORE_KEYS: tuple[str, ...] = ("symbolic_correct", "is_correct")
# What metrics.json records that changes the answers: the benchmark, the sampling parameters
# (``gen``: temperature, top_p, max_tokens, chat_template_kwargs, system_message, seed, ...)
# and the code that builds prompts and scores them. Not the model or endpoint (what an A/B
# varies), nor counts, timings or throughput.
SGL_EVAL_SETTINGS: tuple[str, ...] = ("name", "gen", "sgl_eval_version", "ns_commit_sha")


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
    settings = {key: (metrics or {}).get(key) for key in SGL_EVAL_SETTINGS}
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
