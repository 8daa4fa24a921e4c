"""Each release fact is stated once: a range or bound of SGLang releases (``0.5.19+``,
``0.5.15–0.5.18``, ``from 0.5.20``, ``before 0.5.14``, ``newer than 0.5.23``, ``>= 0.5.12``)
lives in docs/releases.md; the package's code and docstrings, the README and the other docs
say what SGLang has ("where SGLang has a model-override registry") or refer to that page.
Single releases (``0.5.16's loader``, ``still in 0.5.23``) are not ranges and stay where they
explain something. Read as text: no import. What may stay elsewhere is listed below, each with
its reason.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RELEASES_DOC = "docs/releases.md"  # the one place: its tables and the window's rules
VERSION = r"0\.\d+\.\d+(?:\.post\d+|rc\d+|\.dev\d*|\.x)?"
RANGE = re.compile(
    rf"{VERSION}\s*(?:–|—|-|\bto\b|\.\.)\s*{VERSION}"  # 0.5.15–0.5.18, 0.5.12 to 0.5.23
    rf"|{VERSION}\+(?![\w.])"  # 0.5.19+ (not a local label: 0.5.23+gabc123)
    rf"|\b(?:from|before|since|until|till|after|through|older than|newer than|up to|prior to"
    rf"|as of)\s+(?:SGLang\s+)?{VERSION}"
    rf"|{VERSION}\s+(?:and|or)\s+(?:later|newer|older|earlier|above|below)\b"
    rf"|[<>]=?\s*{VERSION}",
    re.IGNORECASE,
)
# The README's first screen says what the plugin does per release (a product requirement):
# the rows of its table may name ranges; each row is checked against `doctor` on its releases
# (test/integration/test_doctor.py::test_the_first_screen_says_what_doctor_says_here).
FIRST_SCREEN = ("README.md", "What it does on your SGLang:", "Details:")
# (file, text on the line): the package's one requirement, quoted (checked below).
QUOTED = {("README.md", "`sglang>=0.5.12`")}


def scanned() -> list[Path]:
    files = sorted((REPO / "python").rglob("*.py"))
    files += [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    return [path for path in files if path.relative_to(REPO).as_posix() != RELEASES_DOC]


def first_screen_rows(text: str) -> set[int]:
    """Line numbers of the README's first-screen table rows."""
    lines = text.splitlines()
    start = lines.index(FIRST_SCREEN[1])
    end = next(n for n in range(start, len(lines)) if lines[n].startswith(FIRST_SCREEN[2]))
    return {n + 1 for n in range(start, end) if lines[n].startswith("|")}


def ranges_in(path: Path) -> list[tuple[int, str, str]]:
    """``(line number, range, line)`` for every range ``path`` states outside what is allowed."""
    name = path.relative_to(REPO).as_posix()
    text = path.read_text(encoding="utf-8")
    allowed_rows = first_screen_rows(text) if name == FIRST_SCREEN[0] else set()
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        if number in allowed_rows or any(quote in line for file, quote in QUOTED if file == name):
            continue
        found += [(number, match.group(0), line.strip()) for match in RANGE.finditer(line)]
    return found


def test_no_release_range_outside_the_releases_page() -> None:
    found = [
        f"{path.relative_to(REPO)}:{number}: {phrase!r} in: {line}"
        for path in scanned()
        for number, phrase, line in ranges_in(path)
    ]
    assert found == [], (
        f"release ranges belong in {RELEASES_DOC} (say what SGLang has, or refer there):\n"
        + "\n".join(found)
    )


def test_the_quoted_requirement_is_pyprojects() -> None:
    assert '"sglang>=0.5.12"' in (REPO / "pyproject.toml").read_text(encoding="utf-8")


def test_the_pattern_finds_each_kind_of_range_and_no_single_release() -> None:
    ranges = [
        "registries (0.5.19+)",
        "on 0.5.15–0.5.18",
        "0.5.12-0.5.14:",
        "from 0.5.20 on",
        "before 0.5.14",
        "(0.5.21+)",
        "0.5.12 to 0.5.23",
        "newer than 0.5.23",
        "0.5.15.post1 and later",
        "sglang>=0.5.12",
        "0.5.12.x–0.5.14",
    ]
    singles = ["0.5.16's loader", "still in 0.5.23", "`0.5.23+gabc123`", "0.5.15.post1, 0.5.18"]
    assert [text for text in ranges if not RANGE.search(text)] == []
    assert [text for text in singles if RANGE.search(text)] == []
