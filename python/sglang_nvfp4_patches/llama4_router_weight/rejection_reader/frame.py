"""What the reader holds while it reads: the names a frame's locals stand for, what it found,
and the small readings of a node (an attribute read, ``getattr``, ``super()``)."""

from __future__ import annotations

import ast
import enum
import functools
import inspect
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

CONFIG = "moe_runner_config"
CUTLASS = "flashinfer_cutlass"
FLAG_NAME = "<the flag>"  # what a callee's parameter computed from the flag reads
MAX_FUNCTIONS = 48  # functions followed for one method, at most
# What reading a function's source raises where it cannot be had or parsed.
UNREADABLE = (OSError, TypeError, SyntaxError)
# What code this reader trips over raises (names standing for each other in a circle, say).
BEYOND = (RecursionError, ValueError, TypeError, AttributeError)
# Builtins that cannot read an attribute of what they are handed.
HARMLESS_BUILTINS = frozenset({"bool", "isinstance", "issubclass", "type", "id", "len", "callable"})


class Kind(enum.Enum):
    SELF = "self"
    CONFIG = "config"  # the config the method reads through self.moe_runner_config
    REAL_CONFIG = "real config"  # a config the flag-free view does not stand for
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
    hidden: bool  # reads through self.moe_runner_config are what the view hides
    bound: dict[str, Kind] = field(default_factory=dict)  # parameters
    derived: dict[str, ast.expr] = field(default_factory=dict)  # single-assignment locals
    imported: dict[str, tuple[str, str]] = field(default_factory=dict)  # local from-imports

    def where(self, node: ast.AST) -> str:
        line = self.first_line + getattr(node, "lineno", 1) - 1
        return f"{self.filename.rsplit('/', 1)[-1]}:{line}"


@dataclass
class Findings:
    rejections: list[str] = field(default_factory=list)
    uses: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    followed: int = 0


@functools.lru_cache(maxsize=256)
def source_of(function: Any) -> tuple[ast.FunctionDef | ast.AsyncFunctionDef, str, int]:
    """``function``'s tree (never changed by the reader), file and first line; parsed once."""
    function = inspect.unwrap(function)
    lines, first = inspect.getsourcelines(function)
    tree = ast.parse(textwrap.dedent("".join(lines)))
    node = tree.body[0]
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        raise TypeError(f"{function!r} is not a function definition")
    return node, inspect.getsourcefile(function) or "?", first


def module_root(function: Any) -> str:
    return str(getattr(inspect.unwrap(function), "__module__", "")).split(".")[0]


def is_super(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"
    )


def unwrapped(value: Any) -> Any:
    if isinstance(value, property):
        value = value.fget
    value = getattr(value, "__func__", value)
    try:
        return inspect.unwrap(value) if callable(value) else value
    except ValueError:
        return value


def attribute_read(node: ast.expr) -> tuple[ast.expr, str] | None:
    if isinstance(node, ast.Attribute):
        return node.value, node.attr
    name = getattr_read(node) if isinstance(node, ast.Call) else None
    return (node.args[0], name) if name is not None else None  # type: ignore[union-attr]


def getattr_read(node: ast.Call) -> str | None:
    """``getattr(x, "name"[, default])``: the name read."""
    if (
        isinstance(node.func, ast.Name)
        and node.func.id == "getattr"
        and len(node.args) in (2, 3)
        and isinstance(node.args[1], ast.Constant)
        and isinstance(node.args[1].value, str)
    ):
        return node.args[1].value
    return None


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


class ReaderBase:
    """What every part of the reader holds: the class read, this release's runner backends,
    whose code is followed, and what was found so far."""

    def __init__(self, owner: type, backends: frozenset[str], package: str) -> None:
        self.owner = owner
        self.backends = backends
        self.package = package  # whose code is followed (SGLang's)
        self.found = Findings()
        self.seen: set[tuple[int, tuple[tuple[str, Kind], ...]]] = set()

    def own(self, function: Any) -> bool:
        return module_root(function) == self.package
