"""What the walker (:mod:`.walker`) is asked (:class:`FlowQuestion`) and what it holds: names
(:class:`Env`), calls (:class:`Arguments`, :class:`Callee`), runs (:class:`Invocation`) (pure:
``ast`` only)."""

from __future__ import annotations

import ast
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from sglang_nvfp4_patches.source_reader.syntax import Function
from sglang_nvfp4_patches.source_reader.values import BOTTOM, Origin, Value, join

MAX_DEPTH = 12  # helper calls followed into; deeper is "cannot follow"
Comprehension = ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp
# What a test's truth says about the path: ``OFF_PATH`` (not walked), ``None``, or a word.
Side = str | None
OFF_PATH = "other"
# Where an expression is read: a test, a name's value, a call's argument, a target, elsewhere.
TEST, BOUND, ARGUMENT, STORE, PLAIN = "test", "bound", "argument", "store", "plain"
# What a name was last set to, and what the names in that expression were set to then.
Definition = tuple[ast.expr, dict[str, Any]]


@dataclass
class Env:
    """One invocation's state on the path; ``defs``: :data:`Definition` per name;
    ``context``: where the function lies; ``parent``: closed-over names."""

    names: dict[str, Value] = field(default_factory=dict)
    closures: dict[str, Function] = field(default_factory=dict)
    parent: Env | None = None
    defs: dict[str, Definition] = field(default_factory=dict)
    context: Any = None

    def copy(self) -> Env:
        return Env(
            dict(self.names), dict(self.closures), self.parent, dict(self.defs), self.context
        )

    def lookup(self, name: str) -> Value | None:
        env: Env | None = self
        while env is not None:
            if name in env.names:
                return env.names[name]
            env = env.parent
        return None

    def closure(self, name: str) -> tuple[Function, Env] | None:
        env: Env | None = self
        while env is not None:
            if name in env.closures:
                return env.closures[name], env
            env = env.parent
        return None


def join_env(first: Env | None, second: Env | None) -> Env | None:
    if first is None or second is None:
        return first or second
    joined = first.copy()
    for name, value in second.names.items():
        joined.names[name] = join(first.names.get(name, BOTTOM), value)
    for name in set(first.defs) | set(second.defs):
        mine, theirs = first.defs.get(name), second.defs.get(name)
        if mine is None or theirs is None or ast.dump(mine[0]) != ast.dump(theirs[0]):
            joined.defs.pop(name, None)  # set alike on both paths, or it says nothing
    joined.closures.update(second.closures)
    return joined


@dataclass
class Arguments:
    """What one call passes; ``unpaired``: ``*args``/``**kwargs`` hide what parameters get;
    ``expressions``: the argument nodes."""

    node: ast.AST
    positional: list[Value]
    keywords: dict[str, Value]
    unpaired: bool
    expressions: tuple[list[ast.expr], dict[str, ast.expr]] = ([], {})


@dataclass(frozen=True)
class Callee:
    """A function a call runs: its tree, values bound before the call's arguments (``self``),
    whether its first parameter is skipped, where it lies (``context``); ``harmless``: code known
    not to read what it is handed."""

    node: Function | None
    bound: tuple[Value, ...] = ()
    skip_first: bool = False
    context: Any = None
    harmless: bool = False
    problem: str = ""  # why its source cannot be read


class Code(Protocol):
    """Where the walker finds the functions a call runs: a module's text or live objects."""

    @property
    def module_body(self) -> Sequence[ast.stmt]: ...

    def callees(self, node: ast.Call, env: Env, receiver: Value | None) -> list[Callee] | None:
        """The functions ``node`` runs (``None``: cannot be known)."""

    def class_value(self, node: ast.Attribute) -> ast.expr | None:
        """A class attribute ``node`` reads, as written."""

    def property(self, node: ast.Attribute, base: Value) -> Callee | None:
        """The getter of a property ``node`` reads."""


@dataclass
class Invocation:
    """What one run of a function body collects besides its state."""

    returns: list[tuple[Value, str]] = field(default_factory=list)  # (value, guard())
    maybe_absent: int = 0  # inside branches of a test on the source (either side)
    absent: int = 0  # inside branches taken when the source is missing
    loop_exits: list[Env] = field(default_factory=list)  # states at break/continue

    def guard(self) -> str:
        return "absent" if self.absent else "maybe" if self.maybe_absent else ""


class FlowQuestion:
    """What the walker is asked: a patch's question overrides what it needs (each default leaves
    the walk as it is); it is handed the walker (``walker``) first."""

    # Calls whose result is still the source they are handed (``float(v)``).
    preserving_calls: frozenset[str] = frozenset()
    # Methods that make a constant of the source they are called on (``v.new_ones()``).
    constant_methods: frozenset[str] = frozenset()
    # At most, functions followed and calls followed into (``None``: no limit).
    max_functions: int | None = None
    max_depth: int | None = MAX_DEPTH

    def read(self, name: str, at: ast.AST, base: Callable[[], Value]) -> Value | None:
        """What reading attribute ``name`` of ``base()`` gives (``at``: the evidence node)."""
        return None

    def sides(
        self, node: ast.If | ast.IfExp | ast.Assert, env: Env, rest: list[ast.stmt]
    ) -> tuple[Side, Side]:
        """What the test being true, and false, says about the path (:data:`OFF_PATH`: that side
        is not walked); ``rest``: what follows an ``if``."""
        return None, None

    def sink(self, call: Arguments) -> set[Origin] | None:
        """What a sink call is handed (recorded), or ``None`` for any other call."""
        return None

    def follows(self, call: Arguments) -> bool:
        """Whether a call the walker can read is followed."""
        return True

    def unfollowed(self, call: Arguments, env: Env, callee: Callee | None) -> None:
        """A call not followed: unreadable (``callee`` ``None``) or not followed."""

    def evaluated(self, node: ast.expr, value: Value, env: Env, position: str) -> None:
        """An expression read at ``position`` (:data:`TEST` ...) gave ``value``."""

    def cannot_follow(self, node: ast.AST, env: Env, why: str) -> None:
        """A readable call not walked (recursion, depth, the function limit)."""

    def memo_key(self, value: Value) -> Hashable:
        """What of a parameter's value tells two runs of a function apart."""
        return value
