"""``accuracy compare`` on sgl-eval runs, written here in sgl-eval's layout.

sgl-eval writes ``<out-dir>/sgl_eval_<bench>_<stamp>/`` with ``metrics.json`` and one
``output-rs<k>.jsonl`` per repeat (one scored sample per line: ``id``, ``symbolic_correct``,
...). The verdict is checked against a hand count of the discordant pairs and scipy's
binomial test / chi-square, computed here from the written scores, not by the tool.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from scipy import stats

from sglang_nvfp4_patches.cli import main

BENCH = "gsm8k"


def write_run(
    root: Path,
    stamp: str,
    scores: list[dict[object, bool]],
    metrics: dict | None = None,
    key: str = "symbolic_correct",
) -> Path:
    """An sgl-eval run directory: one output-rs<k>.jsonl per repeat in ``scores``."""
    run = root / f"sgl_eval_{BENCH}_{stamp}"
    run.mkdir(parents=True)
    for repeat, by_id in enumerate(scores):
        lines = [
            json.dumps(
                {
                    "generation": "... so the answer is 4",
                    "id": qid,
                    "expected_answer": "4",
                    "finish_reason": "stop",
                    "problem": f"question {qid}",
                    "predicted_answer": "4" if right else "5",
                    key: right,
                }
            )
            for qid, right in by_id.items()
        ]
        (run / f"output-rs{repeat}.jsonl").write_text("\n".join(lines) + "\n")
    if metrics is not None:
        (run / "metrics.json").write_text(json.dumps(metrics))
    return run


def random_scores(seed: int, n: int, p_right: float, ids: list[object] | None = None) -> dict:
    rng = random.Random(seed)
    return {qid: rng.random() < p_right for qid in (ids or range(n))}


def hand_count(a: dict, b: dict, alpha: float = 0.05) -> tuple[int, int, float, str]:
    """Discordant pairs and p-value by hand; scipy's exact binomial below 25 pairs."""
    shared = [qid for qid in a if qid in b]
    b_count = sum(a[q] and not b[q] for q in shared)
    c_count = sum(b[q] and not a[q] for q in shared)
    n = b_count + c_count
    if n == 0:
        p = 1.0
    elif n < 25:
        p = stats.binomtest(b_count, n, 0.5).pvalue
    else:
        p = stats.chi2.sf((abs(b_count - c_count) - 1) ** 2 / n, df=1)
    if p < alpha and b_count != c_count:
        verdict = "B is significantly " + ("worse" if b_count > c_count else "better")
    else:
        verdict = "no significant difference"
    return b_count, c_count, p, verdict


def verdict_code(verdict: str) -> int:
    """The exit status ``compare`` gives a verdict: 1 for B worse, as ``ab`` does."""
    return 1 if verdict == "B is significantly worse" else 0


def compare(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    code = main(["accuracy", "compare", *map(str, argv)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(
    ("seed", "n", "p_a", "p_b"),
    [(1, 60, 0.8, 0.8), (2, 400, 0.85, 0.7), (3, 30, 0.5, 0.9), (4, 1319, 0.9, 0.88)],
)
def test_directories_give_the_verdict_of_a_hand_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], seed: int, n: int, p_a: float, p_b: float
) -> None:
    a = random_scores(seed, n, p_a)
    b = random_scores(seed + 100, n, p_b)
    run_a = write_run(tmp_path / "a", "20261130-101500", [a], {"partial": False})
    run_b = write_run(tmp_path / "b", "20261130-113000", [b], {"partial": False})
    code, out, err = compare(capsys, run_a, run_b, "--json")
    result = json.loads(out)
    b_count, c_count, p, verdict = hand_count(a, b)
    assert (code, err) == (verdict_code(verdict), "")
    assert (result["b"], result["c"], result["n"]) == (b_count, c_count, n)
    assert result["p_value"] == pytest.approx(p, rel=1e-9, abs=1e-300)
    assert result["verdict"].startswith(verdict)
    assert result["acc_a"] == pytest.approx(sum(a.values()) / n)
    assert result["file_a"] == str(run_a / "output-rs0.jsonl")
    assert set(result["per_subject"]) == {BENCH}


def test_file_form_and_the_same_table_as_for_run_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = [f"gsm8k-{i}" for i in range(50)]
    a = random_scores(7, 0, 0.9, ids)
    b = {qid: right and i % 5 != 0 for i, (qid, right) in enumerate(a.items())}
    run_a = write_run(tmp_path / "a", "20261130-090000", [a], {"n_repeats": 1})
    run_b = write_run(tmp_path / "b", "20261130-093000", [b], {"n_repeats": 1})
    code, out, _ = compare(capsys, run_a / "output-rs0.jsonl", run_b)
    b_count, c_count, _, verdict = hand_count(a, b)
    assert code == verdict_code(verdict) == 1  # B loses every fifth question A had right
    assert f"discordant pairs: b = {b_count} (A right, B wrong), c = {c_count}" in out
    assert out.splitlines()[-1].startswith(verdict)
    assert any(line.startswith(f"{BENCH}  ") or line.startswith(BENCH) for line in out.splitlines())
    assert "TOTAL" in out


def test_integer_ids_pair_and_a_missing_id_is_counted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = random_scores(8, 40, 0.7)
    b = {qid: not right for qid, right in a.items() if qid != 39}  # every shared pair differs
    run_a = write_run(tmp_path / "a", "20261130-090000", [a], {})
    run_b = write_run(tmp_path / "b", "20261130-093000", [b], {}, key="is_correct")
    code, out, _ = compare(capsys, run_a, run_b, "--json")
    result = json.loads(out)
    assert code == verdict_code(hand_count(a, b)[3])
    assert (result["b"] + result["c"], result["n"]) == (39, 39)
    assert (result["only_in_a"], result["only_in_b"]) == (1, 0)


def test_repeats_are_paired_repeat_by_repeat_never_pooled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = [random_scores(10 + k, 80, 0.8) for k in range(3)]
    b = [random_scores(20 + k, 80, 0.6) for k in range(3)]
    run_a = write_run(tmp_path / "a", "20261130-090000", a, {"partial": False})
    run_b = write_run(tmp_path / "b", "20261130-093000", b, {"partial": False})
    code, out, _ = compare(capsys, run_a, run_b, "--json")
    results = json.loads(out)
    verdicts = [hand_count(a[k], b[k])[3] for k in range(3)]
    assert code == max(map(verdict_code, verdicts)) and len(results) == 3
    for k, result in enumerate(results):
        b_count, c_count, p, _ = hand_count(a[k], b[k])
        assert result["file_a"] == str(run_a / f"output-rs{k}.jsonl")
        assert result["file_b"] == str(run_b / f"output-rs{k}.jsonl")
        assert (result["b"], result["c"], result["n"]) == (b_count, c_count, 80)
        assert result["p_value"] == pytest.approx(p, rel=1e-9)
    code, text, _ = compare(capsys, run_a, run_b)
    assert text.count("discordant pairs:") == 3
    assert "3 repeats paired repeat by repeat" in text and "not pooled" in text


@pytest.mark.parametrize(
    ("metrics", "says"),
    [
        ({"partial": True, "n_done": 10}, "partial: true"),
        (None, "has no metrics.json"),
    ],
)
def test_a_partial_run_is_refused_unless_allowed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], metrics: dict | None, says: str
) -> None:
    a = random_scores(30, 20, 0.8)
    run_a = write_run(tmp_path / "a", "20261130-090000", [a], {})
    run_b = write_run(tmp_path / "b", "20261130-093000", [dict(list(a.items())[:10])], metrics)
    with (run_b / "output-rs0.jsonl").open("a") as handle:
        handle.write('{"id": 10, "symbolic_co')  # the line a stopped run was writing
    for b_side in (run_b, run_b / "output-rs0.jsonl"):
        code, out, err = compare(capsys, run_a, b_side)
        assert (code, out) == (2, "")
        assert err.startswith(f"error: {run_b} ") and says in err and "--allow-partial" in err
        assert len(err.splitlines()) == 1
    code, out, _ = compare(capsys, run_a, run_b, "--allow-partial", "--json")
    result = json.loads(out)
    assert code == 0 and result["n"] == 10 and result["only_in_a"] == 10
    assert result["incomplete"] == [str(run_b / "output-rs0.jsonl")]


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("name", "text", "says"),
    [
        ("no-id", '{"symbolic_correct": true}\n', 'no string or integer "id"'),
        ("no-score", '{"id": 1, "judgement": "yes"}\n', "no binary score"),
        ("score-2", '{"id": 1, "symbolic_correct": 2}\n', "no binary score"),
        ("not-json", '{"id": 1, "symbolic_correct": true}\n{oops\n', ":2: not a JSON line"),
        ("duplicate", '{"id": 1, "symbolic_correct": true}\n' * 2, "duplicate id '1'"),
        ("deep", "[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),
    ],
)
def test_a_malformed_sample_file_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, text: str, says: str
) -> None:
    run = write_run(tmp_path / "a", "20261130-090000", [{1: True}], {})
    bad = _write(tmp_path / name / "sgl_eval_x_20261130-090000" / "output-rs0.jsonl", text)
    _write(bad.parent / "metrics.json", "{}")
    code, out, err = compare(capsys, run, bad)
    assert (code, out) == (2, "")
    assert err.startswith(f"error: {bad}:") and says in err and len(err.splitlines()) == 1


def test_different_repeats_are_refused_naming_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_a = write_run(tmp_path / "a", "20261130-090000", [{1: True}, {1: False}], {})
    run_b = write_run(tmp_path / "b", "20261130-093000", [{1: True}], {})
    code, _, err = compare(capsys, run_a, run_b)
    assert code == 2
    assert "A has 2 repeat(s) (rs0, rs1) and B 1 repeat(s) (rs0)" in err
    assert str(run_a / "output-rs0.jsonl") in err
    code, out, _ = compare(capsys, run_a / "output-rs1.jsonl", run_b, "--json")
    assert code == 0 and (json.loads(out)["b"], json.loads(out)["c"]) == (0, 1)


def test_an_empty_directory_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "metrics.json").write_text("{}")
    code, _, err = compare(capsys, empty, empty)
    assert code == 2 and err.startswith(f"error: {empty}: no output-rs<k>.jsonl")


def test_deeply_nested_run_file_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    deep = _write(tmp_path / "A.json", "[" * 3000 + "]" * 3000)
    code, out, err = compare(capsys, deep, deep)
    assert (code, out) == (2, "")
    assert err.startswith(f"error: {deep}: not readable JSON") and "nested too deeply" in err


def test_runs_with_other_sampling_or_benchmark_are_refused_unless_allowed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """metrics.json's settings are compared field by field; model, URL and timings are what
    differs between two endpoints and are not."""
    scores = random_scores(40, 30, 0.7)
    common = {"name": BENCH, "sgl_eval_version": "0.3.0", "ns_commit_sha": "abc"}
    gen = {"temperature": 0.0, "top_p": 0.95, "max_tokens": 2048}
    metrics_a = {**common, "gen": gen, "model": "m1", "base_url": "http://a/v1", "latency": 1.0}
    metrics_b = {**common, "gen": {**gen, "temperature": 0.6}, "model": "m2", "latency": 9.0}
    run_a = write_run(tmp_path / "a", "20261201-090000", [scores], metrics_a)
    run_b = write_run(tmp_path / "b", "20261201-093000", [scores], metrics_b)
    code, out, err = compare(capsys, run_a, run_b)
    assert (code, out) == (2, "")
    assert "were run with different settings (gen.temperature: A 0.0, B 0.6)" in err
    code, out, _ = compare(capsys, run_a, run_b, "--allow-different-settings", "--json")
    assert (code, json.loads(out)["setting_differences"]) == (0, ["gen.temperature: A 0.0, B 0.6"])
    same = write_run(tmp_path / "c", "20261201-100000", [scores], {**metrics_a, "model": "m3"})
    code, out, _ = compare(capsys, run_a, same, "--json")
    assert (code, json.loads(out)["setting_differences"]) == (0, [])
