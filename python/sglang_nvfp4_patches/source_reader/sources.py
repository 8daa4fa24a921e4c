"""Where a function's source comes from (pure: ``ast`` and ``inspect`` on what it is given; it
imports nothing of SGLang).

Two ways: a module's source text, parsed and indexed by name without importing the module
(:class:`ModuleIndex`: what the value-flow reading follows), or a live function, its lines
found by :mod:`inspect` (:func:`source_of`: what the guard reading follows, with the function's
globals and classes at hand).
"""

from __future__ import annotations

import ast
import functools
import inspect
import textwrap
from dataclasses import dataclass, field
from typing import Any

from sglang_nvfp4_patches.source_reader.syntax import Function, dotted_name, targets

# What reading a function's source raises where it cannot be had or parsed.
UNREADABLE = (OSError, TypeError, SyntaxError)


@dataclass
class ModuleIndex:
    """One module's text, indexed: its functions by name (its classes' methods included),
    which are staticmethods, and each class's attributes."""

    functions: dict[str, list[Function]] = field(default_factory=dict)
    static: set[Function] = field(default_factory=set)
    class_names: dict[str, dict[str, ast.expr]] = field(default_factory=dict)

    @classmethod
    def of(cls, tree: ast.Module) -> ModuleIndex:
        index = cls()
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                attrs = index.class_names.setdefault(node.name, {})
                for item in node.body:
                    if isinstance(item, ast.Assign | ast.AnnAssign) and item.value is not None:
                        for target in targets(item):
                            if isinstance(target, ast.Name):
                                attrs[target.id] = item.value
                    elif isinstance(item, Function):
                        index.add(item)
            elif isinstance(node, Function):
                index.add(node)
        return index

    def add(self, node: Function) -> None:
        self.functions.setdefault(node.name, []).append(node)
        if any(dotted_name(d) == "staticmethod" for d in node.decorator_list):
            self.static.add(node)


@functools.lru_cache(maxsize=256)
def source_of(function: Any) -> tuple[Function, str, int]:
    """A live ``function``'s tree (never changed by a reader), file and first line; parsed
    once."""
    function = inspect.unwrap(function)
    lines, first = inspect.getsourcelines(function)
    tree = ast.parse(textwrap.dedent("".join(lines)))
    node = tree.body[0]
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        raise TypeError(f"{function!r} is not a function definition")
    return node, inspect.getsourcefile(function) or "?", first


def module_root(function: Any) -> str:
    """The top-level package a live function comes from."""
    return str(getattr(inspect.unwrap(function), "__module__", "")).split(".")[0]


def unwrapped(value: Any) -> Any:
    """The function behind a property, a bound or static method, or a decorator."""
    if isinstance(value, property):
        value = value.fget
    value = getattr(value, "__func__", value)
    try:
        return inspect.unwrap(value) if callable(value) else value
    except ValueError:
        return value
