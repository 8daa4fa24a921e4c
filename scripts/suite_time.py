"""How long the primary suite takes, and where the time goes.

Runs ``python -m pytest -q`` (plus any arguments given after ``--``) with a JUnit XML report,
or reads one pytest already wrote (``--junit FILE``), and prints one line per figure: the date
measured, the wall time, the CPU time of the run (user + system, pytest and every process it
started: steadier than wall time on a busy machine), the load average at the start and the end,
the number of tests by outcome, and the files that took longest (setup + call + teardown of
their tests, module- and session-scoped fixtures included where they are first set up).
Exits with pytest's status.

    .venv/bin/python scripts/suite_time.py                    # the primary suite
    .venv/bin/python scripts/suite_time.py --top 20 -- test/unit
    .venv/bin/python scripts/suite_time.py --junit report.xml # an earlier run's report
"""

from __future__ import annotations

import argparse
import datetime
import os
import resource
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclass
class Report:
    """What a JUnit XML report of pytest says: per-file seconds and outcomes."""

    seconds_by_file: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)
    pytest_seconds: float = 0.0

    def top_files(self, count: int) -> list[tuple[str, float]]:
        return self.seconds_by_file.most_common(count)


def test_file(classname: str, root: Path = REPO) -> str:
    """The file of a test from its JUnit ``classname`` (``test.unit.test_x`` or
    ``test.unit.test_x.TestClass``): the longest dotted prefix that is a ``.py`` file."""
    parts = classname.split(".")
    for end in range(len(parts), 0, -1):
        path = Path(*parts[:end]).with_suffix(".py")
        if (root / path).is_file():
            return path.as_posix()
    return classname


def outcome(case: ElementTree.Element) -> str:
    for child, name in (("failure", "failed"), ("error", "error"), ("skipped", "skipped")):
        if case.find(child) is not None:
            return name
    return "passed"


def read_junit(path: Path, root: Path = REPO) -> Report:
    tree = ElementTree.parse(path)
    report = Report()
    for suite in tree.iter("testsuite"):
        report.pytest_seconds += float(suite.get("time", 0.0))
    for case in tree.iter("testcase"):
        name = test_file(case.get("classname", ""), root)
        report.seconds_by_file[name] += float(case.get("time", 0.0))
        report.outcomes[outcome(case)] += 1
    return report


def load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def lines(report: Report, top: int) -> list[str]:
    counts = ", ".join(f"{n} {name}" for name, n in sorted(report.outcomes.items()))
    in_tests = sum(report.seconds_by_file.values())
    out = [
        f"tests: {sum(report.outcomes.values())} ({counts})",
        f"pytest's own time: {report.pytest_seconds:.0f} s ({in_tests:.0f} s in tests)",
        f"top {top} files by time (setup + call + teardown):",
    ]
    out += [f"  {seconds:7.1f} s  {name}" for name, seconds in report.top_files(top)]
    return out


def run_suite(pytest_args: list[str], junit: Path) -> tuple[int, list[str]]:
    """Run pytest; its exit status and the figures only a run has (date, wall, CPU, load)."""
    started = datetime.datetime.now(datetime.timezone.utc)
    load_at_start = load()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    clock = time.monotonic()
    command = [sys.executable, "-m", "pytest", "-q", f"--junitxml={junit}", *pytest_args]
    status = subprocess.call(command, cwd=REPO)
    wall = time.monotonic() - clock
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return status, [
        f"measured: {started:%Y-%m-%d %H:%M} UTC on {os.cpu_count()} cores",
        f"wall: {wall:.0f} s",
        f"CPU (user + system, all processes): {cpu:.0f} s",
        f"load average (1, 5, 15 min): {load_at_start} at the start, {load()} at the end",
        f"pytest exit status: {status}",
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--junit", type=Path, help="read this report instead of running")
    parser.add_argument("--top", type=int, default=10, help="how many files to list")
    parser.add_argument("pytest_args", nargs="*", help="after --: more pytest arguments")
    args = parser.parse_args()
    if args.junit is not None:
        status, figures = 0, [f"report: {args.junit}"]
        report = read_junit(args.junit)
    else:
        with tempfile.TemporaryDirectory(prefix="suite-time-") as folder:
            junit = Path(folder) / "junit.xml"
            status, figures = run_suite(args.pytest_args, junit)
            report = read_junit(junit) if junit.is_file() else Report()
    print("\n".join(["", "suite time:", *figures, *lines(report, args.top)]))
    return status


if __name__ == "__main__":
    sys.exit(main())
