"""Which functions a value-flow reading starts from: read off the source text, not walked
(pure: ``re`` only)."""

from __future__ import annotations

import re

from sglang_nvfp4_patches.source_reader.syntax import Function

_WORD = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")
_CALLED = re.compile(r"(?<!def )(?<![\w])([A-Za-z_]\w*)\s*\(")
_REFERENCED = re.compile(r"(?<![\w])([A-Za-z_]\w*)\b(?!\s*\()")


def roots(functions: dict[str, list[Function]], lines: list[str], sink_prefix: str) -> list[str]:
    """Every function holding a sink or calling one, transitively (read off the text), in name
    order, less the private helpers walked only from their callers (:func:`caller_only`)."""
    names = set(functions)
    words: dict[str, set[str]] = {}
    for name, defs in functions.items():
        for fn in defs:
            text = "\n".join(lines[fn.lineno - 1 : fn.end_lineno])
            words.setdefault(name, set()).update(_WORD.findall(text))
    found_roots = {
        name
        for name, found in words.items()
        if any(w.startswith(sink_prefix) and w not in names for w in found)
    }
    changed = True
    while changed:
        changed = False
        for name, found in words.items():
            if name not in found_roots and found & found_roots:
                found_roots.add(name)
                changed = True
    return sorted(found_roots - caller_only(names, "\n".join(lines)))


def caller_only(names: set[str], text: str) -> set[str]:
    """Private helpers this module calls and never hands on: they run only from their callers."""
    called = set(_CALLED.findall(text)) & names
    passed = set(_REFERENCED.findall(text)) & names  # a helper handed on (partial, ...)
    private = {n for n in names if n.startswith("_") and not n.endswith("__")}
    return private & called - passed
