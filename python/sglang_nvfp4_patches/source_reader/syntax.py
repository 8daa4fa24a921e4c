"""The names of syntax nodes both readings use: a function's node, a dotted name, what a call
calls, assignment targets, ``super()`` and ``getattr`` reads (pure: ``ast`` only)."""

from __future__ import annotations

import ast

Function = ast.FunctionDef | ast.AsyncFunctionDef


def dotted_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted_name(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def callee(node: ast.Call) -> str | None:
    if isinstance(node.func, ast.Name):
        return node.func.id
    if isinstance(node.func, ast.Attribute):
        return node.func.attr
    return None


def targets(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        return list(node.targets)
    if isinstance(node, ast.AnnAssign | ast.AugAssign):
        return [node.target]
    return []


def is_super(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"
    )


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


def attribute_read(node: ast.expr) -> tuple[ast.expr, str] | None:
    """``x.name`` or ``getattr(x, "name")``: what is read, and the name."""
    if isinstance(node, ast.Attribute):
        return node.value, node.attr
    name = getattr_read(node) if isinstance(node, ast.Call) else None
    return (node.args[0], name) if name is not None else None  # type: ignore[union-attr]
