"""What a value can come from, for the walker (:mod:`.walker`): :class:`Kind` of
:class:`Origin`, tuples of values, and joins (pure: ``ast`` only)."""

from __future__ import annotations

import ast
import enum
from collections.abc import Iterable
from dataclasses import dataclass


class Kind(enum.Enum):
    SOURCE = "the value followed"
    CONSTANT = "a constant"
    FALLBACK = "a constant used where the source is missing"
    OPAQUE = "something the reading cannot follow"
    PARAMETER = "a parameter"
    SELF = "the object whose class is read"
    HOLDER = "what the source is read through"


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
    """Constants (and, ``opaque_too``, anything else but the source) used instead of the source
    are fallbacks, not drops."""
    if isinstance(value, Tup):
        return Tup(tuple(as_fallback(item, opaque_too) for item in value.items))
    kinds = (Kind.CONSTANT, Kind.OPAQUE, Kind.PARAMETER) if opaque_too else (Kind.CONSTANT,)
    return frozenset(
        Origin(Kind.FALLBACK, o.node, o.literal, o.note) if o.kind in kinds else o for o in value
    )


def combine(values: Iterable[Value], node: ast.AST) -> Origins:
    """Arithmetic: the source survives it; else what cannot be followed; else constants."""
    origins = frozenset().union(*(flatten(v) for v in values))
    source = frozenset(o for o in origins if o.kind is Kind.SOURCE)
    if source:
        return source
    followed = frozenset(o for o in origins if o.kind not in (Kind.CONSTANT, Kind.FALLBACK))
    return followed or origins or frozenset({Origin(Kind.OPAQUE, node)})
