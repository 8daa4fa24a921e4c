"""The value model of the walk: where a value comes from, tuples of values, and joins."""

from __future__ import annotations

import ast
import enum
from collections.abc import Iterable
from dataclasses import dataclass


class Kind(enum.Enum):
    V_SCALE = "the layer's V scale"
    CONSTANT = "a constant"
    FALLBACK = "a constant used where the V scale is missing"
    OPAQUE = "something this probe cannot follow"
    PARAMETER = "a parameter"


@dataclass(frozen=True)
class Origin:
    """Where (part of) a value comes from; ``node`` is the source of the evidence line."""

    kind: Kind
    node: ast.AST
    literal: object = None  # a constant's value (getattr names are string constants)
    note: str = ""
    function: str = ""  # PARAMETER: whose parameter


Origins = frozenset[Origin]


@dataclass(frozen=True)
class Tup:
    items: tuple[Value, ...]


Value = Origins | Tup
BOTTOM: Origins = frozenset()


def flatten(value: Value) -> Origins:
    if isinstance(value, Tup):
        return frozenset().union(*(flatten(item) for item in value.items))
    return value


def join(*values: Value) -> Value:
    present = [v for v in values if not (isinstance(v, frozenset) and not v)]
    if not present:
        return BOTTOM
    if all(isinstance(v, Tup) for v in present):
        lengths = {len(v.items) for v in present if isinstance(v, Tup)}
        if len(lengths) == 1:
            columns = zip(*(v.items for v in present if isinstance(v, Tup)), strict=True)
            return Tup(tuple(join(*column) for column in columns))
    return frozenset().union(*(flatten(v) for v in present))


def has(value: Value, kind: Kind) -> bool:
    return any(origin.kind is kind for origin in flatten(value))


def as_fallback(value: Value, opaque_too: bool) -> Value:
    """Constants (and, where a test says the V scale is missing, anything else but the V
    scale) used instead of a V scale are fallbacks, not drops."""
    if isinstance(value, Tup):
        return Tup(tuple(as_fallback(item, opaque_too) for item in value.items))
    kinds = (Kind.CONSTANT, Kind.OPAQUE, Kind.PARAMETER) if opaque_too else (Kind.CONSTANT,)
    return frozenset(
        Origin(Kind.FALLBACK, o.node, o.literal, o.note) if o.kind in kinds else o for o in value
    )


def combine(values: Iterable[Value], node: ast.AST) -> Origins:
    """Arithmetic: the V scale survives it; else what cannot be followed; else constants."""
    origins = frozenset().union(*(flatten(v) for v in values))
    v_scale = frozenset(o for o in origins if o.kind is Kind.V_SCALE)
    if v_scale:
        return v_scale
    followed = frozenset(o for o in origins if o.kind not in (Kind.CONSTANT, Kind.FALLBACK))
    return followed or origins or frozenset({Origin(Kind.OPAQUE, node)})


# --- names of AST nodes -------------------------------------------------------------------

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
