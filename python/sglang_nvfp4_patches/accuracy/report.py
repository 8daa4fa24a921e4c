"""Plain-text reports for ``accuracy run`` and ``accuracy compare``."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sglang_nvfp4_patches.accuracy.compare import EXACT_TEST_BELOW, Comparison, SubjectDelta
from sglang_nvfp4_patches.accuracy.limits import ABORT_AFTER_CONSECUTIVE_FAILURES, MAX_OUTPUT_CHARS
from sglang_nvfp4_patches.accuracy.scoring import CHANCE_ACCURACY, COLLAPSE_MARGIN, is_collapsed

if TYPE_CHECKING:  # run.py imports aiohttp; compare should not pay for it
    from sglang_nvfp4_patches.accuracy.run import RunOutcome


def _fmt_acc(value: float | None) -> str:
    return "   n/a" if value is None else f"{value:.4f}"


def format_run_report(outcome: RunOutcome) -> str:
    """Per-subject table, total and speed (stdout); empty when no question got an answer."""
    run = outcome.run
    if run is None or (run["n_answered"] == 0 and outcome.exit_code):
        return ""
    per_subject: Mapping[str, Mapping[str, Any]] = run["per_subject"]
    width = max([len("subject"), len("TOTAL"), *map(len, per_subject)])
    rows = [(name, s["n"], s["correct"], s["accuracy"]) for name, s in per_subject.items()]
    total = ("TOTAL", sum(r[1] for r in rows), sum(r[2] for r in rows), run["accuracy"])
    return "\n".join(
        [
            f"{'subject':<{width}}  {'n':>6}  {'correct':>7}  accuracy",
            *(f"{a:<{width}}  {n:>6}  {c:>7}  {_fmt_acc(acc)}" for a, n, c, acc in [*rows, total]),
            "",
            run_summary(run),
        ]
    )


def run_summary(run: Mapping[str, Any]) -> str:
    """One line: accuracy, questions, wall time, speed, asked vs resumed, answers stored cut."""
    speed = run["questions_per_s"]
    cut = sum("output_cut" in record for record in run["records"])
    return (
        f"accuracy {_fmt_acc(run['accuracy'])} on {run['n_answered']}/{run['n_questions']} "
        f"questions; wall time {run['wall_time_s']:.1f} s, "
        f"{'n/a' if speed is None else f'{speed:.1f}'} questions/s "
        f"({run['answered_this_run']} asked now, {run['resumed']} resumed)"
        + (f"; {cut} answer(s) stored cut at {MAX_OUTPUT_CHARS} characters" if cut else "")
    )


def run_notes(outcome: RunOutcome) -> list[str]:
    """The NOTE/WARNING/ERROR lines of a finished run (stderr)."""
    run = outcome.run
    if run is None:
        return []
    lines: list[str] = list(outcome.notes)
    if is_collapsed(run["accuracy"]):
        lines.append(
            f"WARNING: accuracy {run['accuracy']:.4f} is at or below chance "
            f"({CHANCE_ACCURACY:.2f}) + {COLLAPSE_MARGIN:.2f}: the model's output has collapsed "
            "(check --attention-backend and the quantization path) or the prompts are wrong"
        )
    if outcome.failures:
        qid, error = outcome.failures[0]
        lines.append(
            f"ERROR: {len(outcome.failures)} question(s) failed and were not recorded; "
            f"first: {qid}: {error}"
        )
    if outcome.aborted:
        cause = outcome.abort_cause.value if outcome.abort_cause else "see the errors"
        in_flight = len(outcome.failures) - ABORT_AFTER_CONSECUTIVE_FAILURES
        also = f" ({in_flight} more already asked failed too)" if in_flight > 0 else ""
        lines.append(
            f"ERROR: stopped after {ABORT_AFTER_CONSECUTIVE_FAILURES} failures in a row, without "
            f"a success in between{also}; {outcome.not_attempted} question(s) not attempted "
            f"({cause})"
        )
    if outcome.exit_code:
        lines.append(kept_line(run["n_answered"], outcome.partial, "rerun to ask the rest"))
    return lines


def kept_line(answers: int, partial: Path, rerun: str) -> str:
    """How many answers of an unfinished run are kept and where, then ``rerun``."""
    if answers == 0:
        return f"no answer was received, so none is kept; {rerun}"
    return f"the {answers} answer(s) so far are kept in {partial}; {rerun}"


def format_comparison(cmp: Comparison) -> str:
    """Both accuracies, per-subject deltas, discordant counts, McNemar and the verdict."""
    lines = [f"A: {cmp.label_a}", f"B: {cmp.label_b}"]
    if cmp.only_in_a or cmp.only_in_b:
        lines.append(
            f"NOTE: question sets differ: {cmp.only_in_a} id(s) only in A, {cmp.only_in_b} only "
            f"in B; comparing the {cmp.n} shared question(s)"
        )
    for label in cmp.incomplete:
        lines.append(f"NOTE: {label} is an incomplete run (not every question was answered)")
    if any(cmp.cut_outputs.values()):
        counts = ", ".join(f"{n} in {side}" for side, n in cmp.cut_outputs.items())
        lines.append(f"NOTE: answers stored cut at {MAX_OUTPUT_CHARS} characters ({counts})")
    for difference in cmp.setting_differences:
        lines.append(f"NOTE: the runs differ in a setting that changes answers: {difference}")
    lines.append("")
    width = max([len("subject"), len("TOTAL"), *(len(d.subject) for d in cmp.per_subject)])
    lines.append(f"{'subject':<{width}}  {'n':>6}  {'acc A':>7}  {'acc B':>7}  {'B-A (pp)':>8}")
    total = SubjectDelta("TOTAL", cmp.n, cmp.acc_a, cmp.acc_b)
    for d in [*cmp.per_subject, total]:
        lines.append(
            f"{d.subject:<{width}}  {d.n:>6}  {d.acc_a:>7.4f}  {d.acc_b:>7.4f}  "
            f"{100 * d.delta:>+8.2f}"
        )
    t = cmp.test
    lines.append("")
    lines.append(f"discordant pairs: b = {t.b} (A right, B wrong), c = {t.c} (A wrong, B right)")
    if t.method == "exact-binomial":  # the test that produced the p-value, by name
        lines.append(
            f"McNemar exact binomial test (b + c = {t.b + t.c} < {EXACT_TEST_BELOW}): "
            f"p = {t.p_value:.4g}"
        )
    else:
        lines.append(
            f"McNemar chi-square test, continuity-corrected (b + c = {t.b + t.c}): "
            f"chi2 = {t.chi2:.3f}, p = {t.p_value:.4g}"
        )
    lines.append(cmp.verdict)
    return "\n".join(lines)


def repeats_note(repeats: int, alpha: float) -> str:
    """What a multi-repeat comparison did, so nobody reads it as one pooled test."""
    return (
        f"NOTE: {repeats} repeats paired repeat by repeat (rs<k> of A with rs<k> of B), one "
        f"McNemar test each at alpha={alpha:g}; repeats are not pooled (the same question "
        "asked again is not an independent pair). Pick the repeat to judge by before "
        "looking, or compare one file per side."
    )
