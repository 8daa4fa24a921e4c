"""A patch's status as ``doctor`` prints it: one short line, the evidence below it (pure).
A reason's ``"; "``-joined clauses: the first on the status line, each further one indented
below, all wrapped to :data:`WIDTH` columns; nothing dropped.
"""

from __future__ import annotations

import textwrap

WIDTH = 100
_OPENING, _CLOSING = "([{", ")]}"


def clauses(reason: str) -> list[str]:
    """``reason`` split after each ``"; "`` outside brackets and backquotes (``;`` kept)."""
    parts: list[str] = []
    depth, quoted, start = 0, False, 0
    for index, char in enumerate(reason):
        if char == "`":
            quoted = not quoted
        elif not quoted and char in _OPENING:
            depth += 1
        elif not quoted and char in _CLOSING:
            depth = max(0, depth - 1)
        elif char == ";" and not quoted and depth == 0 and reason[index + 1 : index + 2] == " ":
            parts.append(reason[start : index + 1])
            start = index + 2
    parts.append(reason[start:])
    return [part.strip() for part in parts if part.strip()]


def patch_lines(label: str, status: str, reason: str) -> list[str]:
    """``label  status: first clause``, then each further clause on its own indented lines
    (a single word longer than :data:`WIDTH` is left whole)."""
    first, *rest = clauses(reason) or [""]
    indent = " " * (len(label) + 4)
    wrap = textwrap.TextWrapper(WIDTH, break_long_words=False, break_on_hyphens=False)
    wrap.subsequent_indent = indent
    lines = wrap.wrap(f"{label}  {status}: {first}")
    for clause in rest:
        wrap.initial_indent, wrap.subsequent_indent = indent, indent + "  "
        lines.extend(wrap.wrap(clause))
    return lines
