"""``scripts/mutation_scores.py`` on hand-made mutmut results: which survivors it accepts as
listed equivalents, and what it says about the rest (no SGLang import).

The results imitate mutmut 3.x's work dir: ``mutants/src/<package>/<module>.py`` holding each
function's original (``x_f__mutmut_orig``) and its mutants (``x_f__mutmut_N``), and a
``.py.meta`` beside it with the test run's exit code per mutant (0: the tests passed, so the
mutant survived; 1: killed; 36: timeout).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.repo_scripts import REPO, load_script

MODULE = '''
def x_f__mutmut_orig(a):
    """Add one."""
    return a + 1


def x_f__mutmut_1(a):
    """Add one."""
    return a - 1


def x_f__mutmut_2(a):
    """Add one."""
    return a + 2


def x_f__mutmut_3(a):
    """Add one."""
    return None
'''


scores = load_script("mutation_scores")


def _results(root: Path, exit_codes: dict[int, int]) -> Path:
    mutants = root / "mutants"
    package = mutants / "src" / "pkg"
    package.mkdir(parents=True)
    (package / "m.py").write_text(MODULE, encoding="utf-8")
    by_key = {f"pkg.m.x_f__mutmut_{n}": code for n, code in exit_codes.items()}
    (package / "m.py.meta").write_text(json.dumps({"exit_code_by_key": by_key}))
    return mutants


def test_survivors_listed_with_their_mutated_lines_are_accepted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mutants = _results(tmp_path, {1: 0, 2: 0, 3: 1})
    listed = {"pkg.m.x_f__mutmut_1": "return a - 1", "pkg.m.x_f__mutmut_2": "return a + 2"}
    assert scores.main(mutants, [], listed) == 0
    out = capsys.readouterr().out
    assert "src/pkg/m.py" in out and " 1 / 3" in out
    assert "left: 2, of which 2 listed as equivalent" in out
    assert "not killed and not listed" not in out


def test_a_survivor_not_listed_is_named_with_its_status_and_mutation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mutants = _results(tmp_path, {1: 0, 2: 0, 3: 1})
    assert scores.main(mutants, [], {"pkg.m.x_f__mutmut_1": "return a - 1"}) == 1
    out = capsys.readouterr().out
    assert "left: 2, of which 1 listed as equivalent" in out
    assert "  pkg.m.x_f__mutmut_2: survived: return a + 2\n" in out
    assert "pkg.m.x_f__mutmut_1:" not in out


def test_a_mutant_that_made_the_tests_time_out_counts_as_caught(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mutants = _results(tmp_path, {1: 36, 2: 1, 3: 0})
    assert scores.main(mutants, [], {"pkg.m.x_f__mutmut_3": "return None"}) == 0
    out = capsys.readouterr().out
    assert " 2 / 3 " in out and "(1 of them by timeout)" in out
    assert "left: 1, of which 1 listed as equivalent" in out


def test_a_listed_name_that_now_points_at_another_mutation_is_not_accepted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """After its function changed, mutant 1 may be a different, killable mutation."""
    mutants = _results(tmp_path, {1: 0})
    assert scores.main(mutants, [], {"pkg.m.x_f__mutmut_1": "return a * 1"}) == 1
    out = capsys.readouterr().out
    assert "  pkg.m.x_f__mutmut_1: survived: return a - 1\n" in out
    assert "(listed for another mutation: return a * 1)" in out


def test_a_listed_mutant_that_is_killed_now_must_leave_the_list(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mutants = _results(tmp_path, {1: 1, 2: 1})
    assert scores.main(mutants, [], {"pkg.m.x_f__mutmut_1": "return a - 1"}) == 1
    out = capsys.readouterr().out
    assert "listed as equivalent but not left now (1; remove from the list):" in out
    assert "  pkg.m.x_f__mutmut_1\n" in out


def test_a_selection_scores_and_checks_only_its_mutants(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mutants = _results(tmp_path, {1: 1, 2: 0, 3: 0})
    listed = {"pkg.m.x_f__mutmut_1": "return a - 1", "pkg.m.x_f__mutmut_2": "return a + 2"}
    assert scores.main(mutants, ["pkg.m.x_f__mutmut_2"], listed) == 0
    out = capsys.readouterr().out
    assert " 0 / 1" in out and "x_f__mutmut_3" not in out and "remove" not in out


def test_no_results_is_its_own_exit_status(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert scores.main(tmp_path, [], {}) == 2
    assert capsys.readouterr().err == f"no mutmut results under {tmp_path}\n"


def test_the_equivalents_file_needs_a_tab_between_name_and_mutation(tmp_path: Path) -> None:
    path = tmp_path / "equivalents.txt"
    path.write_text("# comment\n\npkg.m.x_f__mutmut_1\treturn a - 1\npkg.m.x_f__mutmut_2 x\n")
    with pytest.raises(ValueError) as refused:
        scores.read_equivalents(path)
    assert str(refused.value) == (
        f"{path}:4: expected NAME<TAB>mutated lines, got 'pkg.m.x_f__mutmut_2 x'"
    )
    path.write_text("# comment\n\npkg.m.x_f__mutmut_1\treturn a - 1\n")
    assert scores.read_equivalents(path) == {"pkg.m.x_f__mutmut_1": "return a - 1"}


def test_every_listed_equivalent_names_a_function_of_a_mutated_module() -> None:
    listed = scores.read_equivalents(REPO / "scripts/mutation_equivalents.txt")
    config = (REPO / "scripts/mutation.cfg").read_text(encoding="utf-8")
    for name in listed:
        module, function = name.rsplit(".", 1)
        path = REPO / "python" / (module.replace(".", "/") + ".py")
        mutated = f"src/{path.relative_to(REPO / 'python')}"
        folder = f"src/{path.parent.relative_to(REPO / 'python')}/*.py"
        assert mutated in config or folder in config, name
        plain = function.removeprefix("x_").rsplit("__mutmut_", 1)[0]
        method = plain.split("ǁ")[-1]
        assert f"def {method}(" in path.read_text(encoding="utf-8"), name
