"""McNemar statistics against scipy, and ``accuracy compare`` on hand-built and real runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scipy import stats

from accuracy_support.dataset_writer import write_dataset, wrong_letter
from accuracy_support.fake_server import FakeServer, Script
from sglang_nvfp4_patches.accuracy.compare import (
    chi2_sf_1dof,
    exact_binomial_p,
    mcnemar,
)
from sglang_nvfp4_patches.accuracy.store import RUN_FORMAT
from sglang_nvfp4_patches.cli import main

WORSE = "B is significantly worse than A"
HEAD = f'{{"format": "{RUN_FORMAT}", "version": 1, '  # the start of a run file's JSON

TABLES = [
    (0, 0),
    (1, 0),
    (0, 3),
    (5, 7),
    (12, 12),
    (3, 21),  # b + c = 24: last exact case
    (13, 12),  # b + c = 25: first chi-square case
    (20, 45),
    (100, 130),
    (300, 207),
    (1000, 1000),
    (40, 0),
]


@pytest.mark.parametrize(("b", "c"), TABLES)
def test_mcnemar_matches_scipy(b: int, c: int) -> None:
    result = mcnemar(b, c)
    n = b + c
    assert (result.b, result.c) == (b, c)
    if n == 0:
        assert result.chi2 == 0.0 and result.p_value == 1.0
        return
    assert result.chi2 == pytest.approx((abs(b - c) - 1) ** 2 / n, rel=1e-12)
    if n < 25:
        assert result.method == "exact-binomial"
        assert result.p_value == pytest.approx(stats.binomtest(b, n, 0.5).pvalue, rel=1e-9)
    else:
        assert result.method == "chi2-continuity-corrected"
        expected = stats.chi2.sf(result.chi2, 1)
        assert result.p_value == pytest.approx(expected, rel=1e-9, abs=1e-300)


@pytest.mark.parametrize("x", [-1.0, 0.0, 1e-6, 0.5, 1.0, 3.841458820694124, 10.0, 34.6, 120.0])
def test_chi2_survival_matches_scipy(x: float) -> None:
    assert chi2_sf_1dof(x) == pytest.approx(stats.chi2.sf(x, 1), rel=1e-9, abs=1e-300)


@pytest.mark.parametrize(("b", "c"), [(0, 1), (4, 4), (10, 2), (0, 24), (11, 13)])
def test_exact_binomial_matches_scipy(b: int, c: int) -> None:
    assert exact_binomial_p(b, c) == pytest.approx(stats.binomtest(b, b + c, 0.5).pvalue)


def _write_run(
    path: Path, outcomes: dict[str, bool], complete: bool = True, **settings: object
) -> Path:
    """A minimal run file: ``outcomes`` maps id (``subject/index``) -> correct; ``settings``
    (``shots=0``, ...) are recorded beside them."""
    records = [
        {
            "id": qid,
            "subject": qid.split("/")[0],
            "answer": "A",
            "prediction": "A" if right else "B",
            "correct": right,
        }
        for qid, right in outcomes.items()
    ]
    document = {"format": RUN_FORMAT, "version": 1, **settings, "complete": complete}
    path.write_text(json.dumps({**document, "records": records}), encoding="utf-8")
    return path


def _pairs(path_a: Path, path_b: Path, cells: dict[tuple[bool, bool], int], subject: str) -> None:
    """Write two runs whose paired outcomes have the given 2x2 cell counts."""
    a: dict[str, bool] = {}
    b: dict[str, bool] = {}
    for (right_a, right_b), count in cells.items():
        for _ in range(count):
            qid = f"{subject}/{len(a)}"
            a[qid], b[qid] = right_a, right_b
    _write_run(path_a, a, started_at="2026-12-01T10:00:00+00:00")  # as two real runs: their
    _write_run(path_b, b, started_at="2026-12-01T11:00:00+00:00")  # bytes differ


def _compare_json(capsys: pytest.CaptureFixture[str], *argv: str, exit_code: int = 0) -> dict:
    """``compare --json``, which must exit ``exit_code`` (1: B significantly worse)."""
    assert main(["accuracy", "compare", *argv, "--json"]) == exit_code
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize(
    ("b", "c", "verdict"),
    [
        (40, 5, "B is significantly worse than A"),
        (5, 40, "B is significantly better than A"),
        (7, 9, "no significant difference between A and B"),
        (0, 0, "no significant difference between A and B"),
    ],
)
def test_compare_counts_and_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], b: int, c: int, verdict: str
) -> None:
    both_right, both_wrong = 50, 20
    cells = {
        (True, True): both_right,
        (True, False): b,
        (False, True): c,
        (False, False): both_wrong,
    }
    _pairs(tmp_path / "a.json", tmp_path / "b.json", cells, "law")
    files = (str(tmp_path / "a.json"), str(tmp_path / "b.json"))
    result = _compare_json(capsys, *files, exit_code=1 if verdict == WORSE else 0)
    n = both_right + both_wrong + b + c
    assert result["n"] == n
    assert result["acc_a"] == pytest.approx((both_right + b) / n)
    assert result["acc_b"] == pytest.approx((both_right + c) / n)
    assert (result["b"], result["c"]) == (b, c)
    assert result["only_in_a"] == result["only_in_b"] == 0
    assert result["verdict"].startswith(verdict)
    if b + c >= 25:
        expected_chi2 = (abs(b - c) - 1) ** 2 / (b + c)
        assert result["mcnemar_chi2"] == pytest.approx(expected_chi2)
        assert result["p_value"] == pytest.approx(stats.chi2.sf(expected_chi2, 1))


def test_alpha_option_changes_verdict(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # b=10, c=2: exact p = 2 * (1 + 12 + 66) / 4096 = 0.0386
    cells = {(True, True): 30, (True, False): 10, (False, True): 2}
    _pairs(tmp_path / "a.json", tmp_path / "b.json", cells, "law")
    files = (str(tmp_path / "a.json"), str(tmp_path / "b.json"))
    loose = _compare_json(capsys, *files, exit_code=1)
    assert loose["p_value"] == pytest.approx(2 * 79 / 4096)
    assert loose["verdict"].startswith("B is significantly worse")
    strict = _compare_json(capsys, *files, "--alpha", "0.01")
    assert strict["verdict"].startswith("no significant difference")


def test_mismatched_question_sets_are_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = {"x/0": True, "x/1": True, "x/2": False, "y/0": True, "y/9": False}
    b = {"x/0": False, "x/1": True, "x/2": True, "y/0": True, "z/0": True, "z/1": True}
    _write_run(tmp_path / "a.json", a)
    _write_run(tmp_path / "b.json", b, complete=False)
    files = (str(tmp_path / "a.json"), str(tmp_path / "b.json"))
    result = _compare_json(capsys, *files)
    assert (result["n"], result["only_in_a"], result["only_in_b"]) == (4, 1, 2)
    assert (result["b"], result["c"]) == (1, 1)
    assert result["acc_a"] == pytest.approx(3 / 4) and result["acc_b"] == pytest.approx(3 / 4)
    assert result["per_subject"]["x"] == {"n": 3, "acc_a": 2 / 3, "acc_b": 2 / 3, "delta": 0.0}
    assert result["per_subject"]["y"]["n"] == 1
    assert result["incomplete"] == [files[1]]

    assert main(["accuracy", "compare", *files]) == 0
    text = capsys.readouterr().out
    assert "1 id(s) only in A, 2 only in B; comparing the 4 shared question(s)" in text
    assert f"NOTE: {files[1]} is an incomplete run" in text


def test_per_subject_deltas_in_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = {"alg/0": True, "alg/1": True, "alg/2": True, "alg/3": True, "bio/0": False, "bio/1": True}
    b = {"alg/0": True, "alg/1": False, "alg/2": False, "alg/3": True, "bio/0": True, "bio/1": True}
    _write_run(tmp_path / "a.json", a)
    _write_run(tmp_path / "b.json", b)
    assert main(["accuracy", "compare", str(tmp_path / "a.json"), str(tmp_path / "b.json")]) == 0
    text = capsys.readouterr().out
    rows = {
        line.split()[0]: line.split()[1:]
        for line in text.splitlines()
        if line[:3] in {"alg", "bio", "TOT"}
    }
    assert rows["alg"] == ["4", "1.0000", "0.5000", "-50.00"]
    assert rows["bio"] == ["2", "0.5000", "1.0000", "+50.00"]
    assert rows["TOTAL"] == ["6", "0.8333", "0.6667", "-16.67"]
    assert "b = 2 (A right, B wrong), c = 1 (A wrong, B right)" in text


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (None, "no such file"),
        ("{not json", "not readable JSON"),
        ('{"results": []}', "not a run file"),
        (HEAD + '"records": [{"id": "x/0", "subject": "x", "answer": "A"}]}', "records[0] lacks"),
        (
            HEAD + '"records": [{"id": "x/0", "subject": "x", "answer": "A", "correct": "yes"}]}',
            "records[0] lacks",
        ),
        ('{"version": 1, "records": []}', "its 'format' field is missing, expected"),
        ('{"format": "other-tool", "version": 1, "records": []}', "'format' field is 'other-tool'"),
        (f'{{"format": "{RUN_FORMAT}", "version": 2, "records": []}}', "'version' field is 2;"),
        (f'{{"format": "{RUN_FORMAT}", "records": []}}', "'version' field is None;"),
        (f'{{"format": "{RUN_FORMAT}", "version": true, "records": []}}', "field is True;"),
    ],
)
def test_bad_run_file_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, fragment: str
) -> None:
    bad = tmp_path / "bad.json"
    if content is not None:
        bad.write_text(content, encoding="utf-8")
    good = _write_run(tmp_path / "good.json", {"x/0": True})
    assert main(["accuracy", "compare", str(good), str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {bad}: ") and fragment in err
    assert "Traceback" not in err


def test_duplicate_ids_rejected(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    record = {"id": "x/0", "subject": "x", "answer": "A", "prediction": "A", "correct": True}
    dup = tmp_path / "dup.json"
    head = {"format": RUN_FORMAT, "version": 1}
    dup.write_text(json.dumps({**head, "records": [record, record]}), encoding="utf-8")
    assert main(["accuracy", "compare", str(dup), str(dup)]) == 2
    assert "duplicate record id 'x/0'" in capsys.readouterr().err


def test_no_shared_ids_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write_run(tmp_path / "a.json", {"x/0": True})
    _write_run(tmp_path / "b.json", {"y/0": True})
    assert main(["accuracy", "compare", str(tmp_path / "a.json"), str(tmp_path / "b.json")]) == 2
    assert "share no question ids" in capsys.readouterr().err
    empty = [str(_write_run(tmp_path / f"{side}.json", {}, side=side)) for side in "AB"]
    assert main(["accuracy", "compare", *empty]) == 2
    assert "share no question ids" in capsys.readouterr().err


def test_compare_two_real_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """End to end: two runs against scripted servers, then compare; b and c follow from the
    scripts (A wrong on index % 5 == 0, B wrong on index % 3 == 0)."""
    data = tmp_path / "mmlu"
    questions = write_dataset(data, {"anatomy": 30, "virology": 30})

    def replies(wrong_every: int) -> dict[str, str]:
        return {
            qid: f" {wrong_letter(q.answer) if q.index % wrong_every == 0 else q.answer}"
            for qid, q in questions.items()
        }

    for name, every in (("a", 5), ("b", 3)):
        with FakeServer(Script(replies=replies(every))) as srv:
            argv = ["accuracy", "run", "--base-url", srv.url, "--data", str(data), "--no-progress"]
            assert main([*argv, "--out", str(tmp_path / f"{name}.json")]) == 0
    capsys.readouterr()
    result = _compare_json(capsys, str(tmp_path / "a.json"), str(tmp_path / "b.json"))
    indices = range(30)
    b = 2 * sum(1 for i in indices if i % 5 != 0 and i % 3 == 0)  # A right, B wrong
    c = 2 * sum(1 for i in indices if i % 5 == 0 and i % 3 != 0)  # A wrong, B right
    assert (result["n"], result["b"], result["c"]) == (60, b, c)
    assert result["acc_a"] == pytest.approx(48 / 60) and result["acc_b"] == pytest.approx(40 / 60)
    assert result["p_value"] == pytest.approx(stats.binomtest(b, b + c, 0.5).pvalue)


def test_the_statistics_line_names_the_test_that_gave_the_p_value(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = (str(tmp_path / "a.json"), str(tmp_path / "b.json"))
    _pairs(*map(Path, files), {(True, True): 30, (True, False): 10, (False, True): 2}, "law")
    assert main(["accuracy", "compare", *files]) == 1
    exact = f"McNemar exact binomial test (b + c = 12 < 25): p = {2 * 79 / 4096:.4g}"
    assert exact in capsys.readouterr().out.splitlines()
    _pairs(*map(Path, files), {(True, True): 30, (True, False): 40, (False, True): 5}, "law")
    assert main(["accuracy", "compare", *files]) == 1
    chi2 = (40 - 5 - 1) ** 2 / 45
    line = (
        "McNemar chi-square test, continuity-corrected (b + c = 45): "
        f"chi2 = {chi2:.3f}, p = {stats.chi2.sf(chi2, 1):.4g}"
    )
    assert line in capsys.readouterr().out.splitlines()


@pytest.mark.parametrize(
    ("a_settings", "b_settings", "named"),
    [
        ({"shots": 5}, {"shots": 0}, "shots: A 5, B 0"),
        ({"max_new_tokens": 2}, {"max_new_tokens": 8}, "max_new_tokens: A 2, B 8"),
        ({"api": "native"}, {"api": "openai"}, "api: A 'native', B 'openai'"),
    ],
)
def test_runs_with_other_answer_settings_are_refused_unless_allowed(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    a_settings: dict,
    b_settings: dict,
    named: str,
) -> None:
    outcomes = {f"law/{i}": i % 3 == 0 for i in range(12)}
    a = _write_run(tmp_path / "a.json", outcomes, **a_settings)
    b = _write_run(tmp_path / "b.json", outcomes, **b_settings)
    assert main(["accuracy", "compare", str(a), str(b)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {a} and {b} were run with different settings ({named}): ")
    assert "--allow-different-settings" in err and len(err.splitlines()) == 1
    result = _compare_json(capsys, str(a), str(b), "--allow-different-settings")
    assert result["setting_differences"] == [named] and result["n"] == 12
    assert main(["accuracy", "compare", str(a), str(b), "--allow-different-settings"]) == 0
    note = f"NOTE: the runs differ in a setting that changes answers: {named}"
    assert note in capsys.readouterr().out.splitlines()


def test_what_an_ab_varies_is_not_a_setting_difference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The server flags, the model name and the URL are what an A/B compares."""
    outcomes = {f"law/{i}": True for i in range(4)}
    a = _write_run(tmp_path / "a.json", outcomes, model="m1", base_url="http://h:1", server=None)
    b = _write_run(
        tmp_path / "b.json", outcomes, model="m2", base_url="http://h:2", server={"args": "--x"}
    )
    result = _compare_json(capsys, str(a), str(b))
    assert result["setting_differences"] == [] and result["n"] == 4


@pytest.mark.parametrize(("prediction", "correct"), [("A", False), ("B", True), (None, True)])
def test_a_correct_flag_that_contradicts_prediction_and_answer_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], prediction: str | None, correct: bool
) -> None:
    """A hand-edited ``correct`` would flip the verdict; it is recomputed and checked."""
    outcomes = {f"law/{i}": i % 2 == 0 for i in range(30)}
    good = _write_run(tmp_path / "good.json", outcomes)
    edited = tmp_path / "edited.json"
    data = json.loads(good.read_text())
    data["records"][7].update(prediction=prediction, correct=correct)  # answer stays "A"
    edited.write_text(json.dumps(data))
    assert main(["accuracy", "compare", str(good), str(edited)]) == 2
    err = capsys.readouterr().err
    says = (
        f"error: {edited}: records[7] (law/7) says correct: {str(correct).lower()}, but its "
        f"prediction is {prediction!r} and its answer 'A'; the file was edited or damaged"
    )
    assert err.startswith(says) and len(err.splitlines()) == 1


def test_a_question_with_two_answer_keys_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outcomes = {f"law/{i}": True for i in range(5)}
    a = _write_run(tmp_path / "a.json", outcomes)
    b = tmp_path / "b.json"
    data = json.loads(a.read_text())
    data["records"][2].update(answer="C", prediction="C")  # consistent, but another question
    b.write_text(json.dumps(data))
    assert main(["accuracy", "compare", str(a), str(b)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: question law/2 has answer key A in {a} but C in {b}: ")


@pytest.mark.parametrize("how", ["same-path", "link", "copy", "sgl-eval-dir"])
def test_one_run_given_twice_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    """Once "no significant difference", exit 0: a typo in CI passed."""
    a = _write_run(tmp_path / "a.json", {"law/0": True, "law/1": False})
    if how == "sgl-eval-dir":
        a = tmp_path / "sgl_eval_gsm8k_20261201-101500"
        a.mkdir()
        (a / "output-rs0.jsonl").write_text('{"id": 1, "symbolic_correct": true}\n')
        (a / "metrics.json").write_text("{}")
    b = {
        "same-path": a,
        "sgl-eval-dir": a,
        "link": tmp_path / "b.json",
        "copy": tmp_path / "c.json",
    }[how]
    if how == "link":
        b.symlink_to(a)
    if how == "copy":
        b.write_bytes(a.read_bytes())
    assert main(["accuracy", "compare", str(a), str(b)]) == 2
    err = capsys.readouterr().err
    never = "comparing a run with itself always finds no difference; give the two runs to compare"
    says = {
        "same-path": f"A and B are the same file ({a}): {never}",
        "link": f"A and B are the same file ({a}): {never}",
        "sgl-eval-dir": f"A and B are the same directory ({a}): {never}",
        "copy": f"{a} and {b} have the same content, byte for byte: one is a copy of the other "
        "(a run file records when it ran), so comparing them always finds no difference; "
        "give the two runs to compare",
    }[how]
    assert err == f"error: {says}\n"
