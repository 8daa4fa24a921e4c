"""What a guard reading holds while it reads (pure: ``ast`` only): what it asks about
(:class:`Subject`), what a frame's names stand for (:class:`Role`, :class:`Frame`), and what it
found (:class:`Findings`)."""

from __future__ import annotations

import ast
import enum
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

FLAG_NAME = "<the flag>"  # what a callee's parameter computed from the flag reads
MAX_FUNCTIONS = 48  # functions followed for one method, at most
# What code this reader trips over raises (names standing for each other in a circle, say).
BEYOND = (RecursionError, ValueError, TypeError, AttributeError)
# Builtins that cannot read an attribute of what they are handed.
HARMLESS_BUILTINS = frozenset({"bool", "isinstance", "issubclass", "type", "id", "len", "callable"})


@dataclass(frozen=True)
class Subject:
    """What is read: the flag ``self.<holder>.<flag>``, with the branches that name a runner
    backend decided for ``runner``; a test that also compares ``condition`` makes a rejection
    ``condition_note`` only."""

    holder: str  # the attribute of self holding the flag (what a view may hide)
    flag: str
    runner: str
    backends: frozenset[str]  # this release's runner backend values
    condition: str = ""
    condition_note: str = ""


class Role(enum.Enum):
    SELF = "self"
    CONFIG = "config"  # the holder the method reads through self.<holder>
    REAL_CONFIG = "real config"  # a holder the view does not stand for
    FLAG = "flag"
    REAL_FLAG = "real flag"


@dataclass
class Frame:
    """One function being read: its tree, where it lies, and what its names stand for."""

    node: ast.FunctionDef | ast.AsyncFunctionDef
    filename: str
    first_line: int
    globals: dict[str, Any]
    defined_in: type | None
    hidden: bool  # reads through self.<holder> are what the view hides
    bound: dict[str, Role] = field(default_factory=dict)  # parameters
    derived: dict[str, ast.expr] = field(default_factory=dict)  # single-assignment locals
    imported: dict[str, tuple[str, str]] = field(default_factory=dict)  # local from-imports

    def where(self, node: ast.AST) -> str:
        line = self.first_line + getattr(node, "lineno", 1) - 1
        return f"{self.filename.rsplit('/', 1)[-1]}:{line}"


@dataclass
class Findings:
    """Where the flag is rejected, used, or read in a way the reader cannot follow."""

    rejections: list[str] = field(default_factory=list)
    uses: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    followed: int = 0


def collect_locals(frame: Frame) -> None:
    """Locals assigned once (to a name, nowhere else bound) stand for their value; local
    ``from m import name`` are looked up in ``sys.modules``."""
    assigned: dict[str, list[ast.expr | None]] = {}
    for node in ast.walk(frame.node):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                frame.imported[alias.asname or alias.name] = (node.module, alias.name)
        targets: Iterable[ast.expr] = ()
        value: ast.expr | None = None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)):
            targets, value = [node.target], node.value
        elif isinstance(node, (ast.AugAssign, ast.For, ast.AsyncFor)):
            targets = [node.target]
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            targets = [node.optional_vars]
        for target in targets:
            if isinstance(target, ast.Name):
                assigned.setdefault(target.id, []).append(value)
            else:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        assigned.setdefault(name.id, []).append(None)
    parameters = {a.arg for a in ast.walk(frame.node.args) if isinstance(a, ast.arg)}
    for name, values in assigned.items():
        if len(values) == 1 and values[0] is not None and name not in parameters:
            frame.derived[name] = values[0]
