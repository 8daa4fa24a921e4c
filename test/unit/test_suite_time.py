"""``scripts/suite_time.py`` on a hand-written JUnit report: tests are counted by outcome and
their time summed per file (a test class's tests under its file), longest first."""

from __future__ import annotations

from pathlib import Path

from support.repo_scripts import load_script

suite_time = load_script("suite_time")

REPORT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="1" failures="1" skipped="1" tests="6" time="9.5">
<testcase classname="test.unit.test_a" name="test_one" time="1.0"/>
<testcase classname="test.unit.test_a.TestGroup" name="test_two" time="2.5"/>
<testcase classname="test.unit.test_b" name="test_three" time="4.0"><failure message=""/></testcase>
<testcase classname="test.unit.test_b" name="test_four" time="0.5"><skipped message="y"/></testcase>
<testcase classname="test.unit.test_b" name="test_five" time="0.25"><error message="z"/></testcase>
<testcase classname="test.unit.test_c" name="test_six" time="0.75"/>
</testsuite></testsuites>
"""


def tree(root: Path) -> Path:
    for name in ("test_a", "test_b", "test_c"):
        (root / "test" / "unit").mkdir(parents=True, exist_ok=True)
        (root / "test" / "unit" / f"{name}.py").write_text("")
    report = root / "junit.xml"
    report.write_text(REPORT)
    return report


def test_time_is_summed_per_file_and_tests_counted_by_outcome(tmp_path: Path) -> None:
    report = suite_time.read_junit(tree(tmp_path), tmp_path)
    assert report.top_files(2) == [("test/unit/test_b.py", 4.75), ("test/unit/test_a.py", 3.5)]
    assert report.outcomes == {"passed": 3, "failed": 1, "skipped": 1, "error": 1}
    assert report.pytest_seconds == 9.5


def test_the_printed_lines_name_the_count_and_the_longest_files(tmp_path: Path) -> None:
    report = suite_time.read_junit(tree(tmp_path), tmp_path)
    lines = suite_time.lines(report, top=1)
    assert lines[0] == "tests: 6 (1 error, 1 failed, 3 passed, 1 skipped)"
    assert lines[1] == "pytest's own time: 10 s (9 s in tests)"
    assert lines[3:] == ["      4.8 s  test/unit/test_b.py"]


def test_a_classname_without_a_file_is_kept_as_it_is(tmp_path: Path) -> None:
    assert suite_time.test_file("test.unit.test_gone", tmp_path) == "test.unit.test_gone"
