"""The outputs README.md and docs/*.md quote, read as checkable examples (pure: no SGLang).

Convention (test/unit/test_docs.py enforces it): every fenced block carries a language.
``console`` blocks quote output: a ``$ COMMAND`` line (``VAR=value`` prefixes allowed, and a
trailing ``# exit N`` for the status it must end with), then the lines it prints. Numbers in
the quoted lines match any number, ``...`` inside a line matches anything, and a line that is
only ``...`` stands for any number of lines. ``bash``/``python`` blocks are things to type;
``text`` blocks are synopses, never output.

A console block runs on the installed SGLang, unless the line above it says otherwise:
``<!-- output on: next-release -->`` (0.5.23's code under 0.5.24.dev0, checked by
test_next_release.py).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from support.repo_scripts import REPO

CONTEXTS = ("installed", "next-release")
_FENCE = re.compile(r"^```(\S*)\s*$")
_CONTEXT = re.compile(r"^<!-- output on: ([\w-]+) -->$")
_NUMBER = re.compile(r"\d+(?:\.\d+)?(?:e[-+]?\d+)?")
_EXIT = re.compile(r"\s+#\s*exit (\d+)\s*$")
_ENV = re.compile(r"^([A-Z][A-Z0-9_]*)=(\S*)$")


def documents() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


@dataclass
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    language: str
    context: str
    body: list[str] = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"


def blocks(path: Path) -> list[Block]:
    found: list[Block] = []
    current: Block | None = None
    previous = ""
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        fence = _FENCE.match(line)
        if current is not None:
            if line.startswith("```"):
                found.append(current)
                current = None
            else:
                current.body.append(line)
        elif fence:
            context = _CONTEXT.match(previous.strip())
            current = Block(
                path, number, fence.group(1), context.group(1) if context else "installed"
            )
        previous = line
    if current is not None:
        raise ValueError(f"{current.where}: a fence that is never closed")
    return found


@dataclass(frozen=True)
class Example:
    """One ``$ COMMAND`` of a console block, with what it must print."""

    where: str
    env: dict[str, str]
    argv: list[str]
    status: int | None
    expected: list[str]


def examples(block: Block) -> list[Example]:
    found: list[Example] = []
    for offset, line in enumerate(block.body):
        if line.startswith("$ "):
            command = line[2:]
            status = _EXIT.search(command)
            words = shlex.split(command[: status.start()] if status else command, comments=True)
            env = {}
            while words and (assignment := _ENV.match(words[0])):
                env[assignment.group(1)] = assignment.group(2)
                words.pop(0)
            where = f"{block.where}+{offset + 1}"
            found.append(Example(where, env, words, int(status.group(1)) if status else None, []))
        elif found:
            found[-1].expected.append(line)
        else:
            raise ValueError(f"{block.where}: a console block starts with a `$ ` command line")
    return found


def quoted(context: str) -> list[Example]:
    """Every console example of README.md and docs/*.md that runs in ``context``."""
    return [
        example
        for path in documents()
        for block in blocks(path)
        if block.language == "console" and block.context == context
        for example in examples(block)
    ]


def problem_with(example: Example, returncode: int, stdout: str) -> str | None:
    """None when a run of ``example`` ended as quoted (``# exit N``, else 0) and printed what
    is quoted, else what differs."""
    want = 0 if example.status is None else example.status
    if returncode != want:
        return f"{example.where}: exit {returncode}, quoted {want}"
    problem = mismatch(example.expected, stdout.splitlines())
    return None if problem is None else f"{example.where}: {problem}\n--- printed:\n{stdout}"


def _line_pattern(quoted: str) -> re.Pattern[str]:
    parts = []
    for index, piece in enumerate(quoted.rstrip().split("...")):
        if index:
            parts.append(".*")
        last = 0
        for number in _NUMBER.finditer(piece):
            parts.append(re.escape(piece[last : number.start()]))
            parts.append(r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?")
            last = number.end()
        parts.append(re.escape(piece[last:]))
    return re.compile("".join(parts) + r"\s*")


def mismatch(expected: list[str], actual: list[str]) -> str | None:
    """None when ``actual`` matches the quoted lines, else what first differs."""
    return _match(expected, [line.rstrip() for line in actual], 0, 0)


def _first_matches(expected: list[str], line: str) -> bool:
    return expected[0].strip() == "..." or bool(_line_pattern(expected[0]).fullmatch(line))


def _match(expected: list[str], actual: list[str], i: int, j: int) -> str | None:
    while i < len(expected):
        if expected[i].strip() == "...":
            rest = expected[i + 1 :]
            if not rest:
                return None
            tried = [(k, _match(rest, actual, 0, k)) for k in range(j, len(actual) + 1)]
            if any(problem is None for _, problem in tried):
                return None
            # Report the try whose first line matched: it is where the quote goes wrong.
            anchored = [p for k, p in tried if k < len(actual) and _first_matches(rest, actual[k])]
            return (anchored or [p for _, p in tried])[0]
        if j >= len(actual):
            return f"quoted line {expected[i]!r} is missing at the end of the output"
        if not _line_pattern(expected[i]).fullmatch(actual[j]):
            return f"quoted {expected[i]!r}, printed {actual[j]!r}"
        i, j = i + 1, j + 1
    if j < len(actual):
        return f"printed {actual[j]!r} after the last quoted line (quote `...` to skip lines)"
    return None
