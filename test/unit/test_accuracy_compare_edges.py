"""``accuracy compare`` at its edges: the alpha it accepts, a p-value equal to alpha, and the
``--json`` fields (no SGLang import). Found by ``scripts/mutation.sh``."""

from __future__ import annotations

import pytest

from sglang_nvfp4_patches.accuracy.compare import LoadedRun, compare_runs, run_from_document
from sglang_nvfp4_patches.accuracy.errors import CompareError, RunFileError


def run(label: str, right: list[bool]) -> LoadedRun:
    records = {f"q{i}": {"subject": "math", "correct": ok} for i, ok in enumerate(right)}
    return LoadedRun(label, records, complete=True)


# A right on all 8, B wrong on the first 5: b = 5, c = 0, so the exact two-sided p is
# 2 * (1/2)**5 = 0.0625.
A = run("A.json", [True] * 8)
B = run("B.json", [False] * 5 + [True] * 3)


def test_a_p_value_equal_to_alpha_is_not_significant() -> None:
    at = compare_runs(A, B, alpha=0.0625)
    assert at.verdict == "no significant difference between A and B (p=0.0625, alpha=0.0625)"
    assert not at.b_is_worse
    above = compare_runs(A, B, alpha=0.1)
    assert above.verdict == "B is significantly worse than A (p=0.0625, alpha=0.1)"
    assert above.b_is_worse
    better = compare_runs(B, A, alpha=0.1)
    assert better.verdict == "B is significantly better than A (p=0.0625, alpha=0.1)"


def test_the_json_carries_delta_method_and_alpha() -> None:
    result = compare_runs(A, B, alpha=0.1).to_json()
    assert result["delta"] == pytest.approx(3 / 8 - 1)
    assert result["p_method"] == "exact-binomial"
    assert result["alpha"] == 0.1
    assert (result["b"], result["c"], result["p_value"]) == (5, 0, 0.0625)


def test_runs_with_other_settings_are_refused_unless_asked_naming_each_difference() -> None:
    a = LoadedRun("A.json", A.records, True, {"api": "native", "shots": 5})
    b = LoadedRun("B.json", B.records, True, {"api": "openai", "shots": 0})
    with pytest.raises(CompareError) as refused:
        compare_runs(a, b)  # refused by default
    assert str(refused.value) == (
        "A.json and B.json were run with different settings (api: A 'native', B 'openai'; "
        "shots: A 5, B 0): their answers differ for that reason too, so the test would not "
        "measure the servers alone. Rerun one side with the other's settings, or pass "
        "--allow-different-settings to compare them anyway"
    )
    allowed = compare_runs(a, b, allow_different_settings=True)
    assert allowed.setting_differences == ["api: A 'native', B 'openai'", "shots: A 5, B 0"]


def test_one_question_id_with_two_answer_keys_is_refused_naming_it() -> None:
    keyed = {qid: {**record, "answer": "A"} for qid, record in A.records.items()}
    rekeyed = {**keyed, "q3": {**keyed["q3"], "answer": "C"}}
    with pytest.raises(CompareError) as refused:
        compare_runs(LoadedRun("A.json", keyed, True), LoadedRun("B.json", rekeyed, True))
    assert str(refused.value) == (
        "question q3 has answer key A in A.json but C in B.json: the runs used different data, "
        "so pairing them by id would pair different questions"
    )


def test_a_record_whose_correct_contradicts_its_prediction_is_refused_naming_it() -> None:
    record = {"id": "law/0", "subject": "law", "answer": "B", "prediction": "A", "correct": True}
    with pytest.raises(RunFileError) as refused:
        run_from_document("A.json", {"records": [record]})
    assert str(refused.value) == (
        "A.json: records[0] (law/0) says correct: true, but its prediction is 'A' and its "
        "answer 'B'; the file was edited or damaged, so its verdict cannot be trusted: restore "
        "it or run again"
    )
