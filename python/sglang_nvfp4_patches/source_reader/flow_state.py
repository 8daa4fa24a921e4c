"""What a value-flow reading is asked (:class:`FlowQuestion`, which a patch's question fills in)
and what it holds: one invocation's names (:class:`Env`), what a call passes
(:class:`Arguments`), what a run of a body collects (:class:`Invocation`) (pure: ``ast`` and
``re`` only)."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from sglang_nvfp4_patches.source_reader.values import BOTTOM, Origin, Value, join

MAX_DEPTH = 12  # helper calls followed into; deeper is "cannot follow"
Comprehension = ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp
# What a test being true (or false) says about the path walked: ``OFF_PATH`` (that side is
# not walked), ``None`` (nothing), or another word the question uses for its path.
Side = str | None
OFF_PATH = "other"


@dataclass
class Env:
    """One function invocation's state on the path walked; ``flags``: names bound to a test of the
    path; ``parent`` holds closed-over names."""

    names: dict[str, Value] = field(default_factory=dict)
    flags: dict[str, tuple[Side, Side]] = field(default_factory=dict)
    closures: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = field(default_factory=dict)
    parent: Env | None = None

    def copy(self) -> Env:
        return Env(dict(self.names), dict(self.flags), dict(self.closures), self.parent)

    def lookup(self, name: str) -> Value | None:
        env: Env | None = self
        while env is not None:
            if name in env.names:
                return env.names[name]
            env = env.parent
        return None

    def closure(self, name: str) -> tuple[ast.FunctionDef | ast.AsyncFunctionDef, Env] | None:
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
    for name in set(first.flags) ^ set(second.flags):
        joined.flags.pop(name, None)
    joined.closures.update(second.closures)
    return joined


@dataclass
class Arguments:
    """What one call passes; ``unpaired`` when ``*args``/``**kwargs`` (or an unseen caller)
    hide what the parameters get."""

    node: ast.AST
    positional: list[Value]
    keywords: dict[str, Value]
    unpaired: bool


@dataclass
class Invocation:
    """What one run of a function body collects besides its state."""

    returns: list[tuple[Value, str]] = field(default_factory=list)  # (value, guard())
    maybe_absent: int = 0  # inside branches of a test on the source (either side)
    absent: int = 0  # inside branches taken when the source is missing
    loop_exits: list[Env] = field(default_factory=list)  # states at break/continue

    def guard(self) -> str:
        return "absent" if self.absent else "maybe" if self.maybe_absent else ""


@dataclass(frozen=True)
class FlowQuestion:
    """What the reading is asked: which argument of which calls (the sinks) to follow back, to
    which value (the source), and which branches lie on the path walked."""

    # Attributes (and getattr names) that are the source: ``layer.v_scale``.
    source_name: re.Pattern[str]
    # Calls named so, and not defined in the module, are sinks: the walk records
    # ``sink_value(call)`` for each.
    sink_prefix: str
    sink_value: Callable[[Arguments], set[Origin]]
    # (what a test being true says, what it being false says) about the path walked, given
    # the names bound to earlier tests: ``OFF_PATH`` keeps a side from being walked.
    path_sides: Callable[[ast.expr, dict[str, tuple[Side, Side]]], tuple[Side, Side]]
    # Calls whose result is still the source they are handed (``float(v)``).
    preserving_calls: frozenset[str] = frozenset()
    # Methods that make a constant of the source they are called on (``v.new_ones()``).
    constant_methods: frozenset[str] = frozenset()
