"""Bound arguments: which parameter of a function each argument of a call meets (an argument's
node, or its value) (pure: ``ast`` only)."""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from typing import TypeVar

Item = TypeVar("Item")


def pair(
    arguments: ast.arguments,
    positional: Sequence[Item],
    keywords: Mapping[str | None, Item],
    skip_first: bool,
) -> tuple[dict[str, Item], list[str]]:
    """Each parameter's argument, and those given nothing; ``skip_first``: a method's object."""
    params = [p.arg for p in (*arguments.posonlyargs, *arguments.args)]
    params = params[1:] if skip_first else params
    named = [*params, *(p.arg for p in arguments.kwonlyargs)]
    given = dict(zip(params, positional, strict=False))
    for name, item in keywords.items():
        if name in named and name not in given:
            given[name] = item  # type: ignore[index]
    return given, [name for name in named if name not in given]


def defaults(arguments: ast.arguments) -> dict[str, ast.expr]:
    """Each parameter's default, as written."""
    params = [*arguments.posonlyargs, *arguments.args]
    first_default = len(params) - len(arguments.defaults)
    found = {p.arg: d for p, d in zip(params[first_default:], arguments.defaults, strict=True)}
    for param, default in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True):
        if default is not None:
            found[param.arg] = default
    return found
