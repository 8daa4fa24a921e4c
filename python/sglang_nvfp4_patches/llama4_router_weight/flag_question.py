"""What a method does with a flag it reads, on one runner: the question the Llama 4 rejection
reading asks the walker (pure: ``ast`` and ``inspect`` on the objects it is given).

Runner-backend tests are decided for the chosen runner; calls handed ``self``, the holder or
the flag are followed; truth is three-valued (``None``: cannot say). Each read of the flag is
a **rejection** (through ``self.<holder>``, what the view hides), a **use**, or **unknown**;
docs/llama4-rejection-reader.md has the table.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field

from sglang_nvfp4_patches.source_reader.flow_state import (
    OFF_PATH,
    PLAIN,
    STORE,
    Arguments,
    Callee,
    Definition,
    Env,
    FlowQuestion,
    Side,
)
from sglang_nvfp4_patches.source_reader.live_code import LiveContext
from sglang_nvfp4_patches.source_reader.syntax import is_super
from sglang_nvfp4_patches.source_reader.values import Kind, Origin, Value, flatten
from sglang_nvfp4_patches.source_reader.walker import Walker

MAX_FUNCTIONS = 48  # functions followed for one method, at most
SELF, CONFIG, REAL_CONFIG, FLAG, REAL_FLAG = "self", "config", "real config", "flag", "real flag"
_READS = ast.Name | ast.Attribute | ast.Call | ast.NamedExpr  # what can stand for a role


@dataclass
class FlagQuestion(FlowQuestion):
    """The flag ``self.<holder>.<flag>``, branches naming one of ``backends`` decided for
    ``runner``; a test also comparing ``condition`` makes a rejection ``condition_note`` only;
    ``hidden``: reads through ``self.<holder>`` are what the view hides."""

    holder: str
    flag: str
    runner: str
    backends: frozenset[str]  # this release's runner backend values
    condition: str
    condition_note: str
    hidden: bool
    rejections: list[str] = field(default_factory=list)
    uses: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    spelled: dict[ast.AST, str] = field(default_factory=dict)  # the flag's name as a string
    scopes: dict[ast.AST, tuple[set[str], set[ast.AST]]] = field(default_factory=dict)
    max_functions: int | None = MAX_FUNCTIONS
    walker: Walker = field(init=False)  # set by the walker that asks it

    def found_unknown(self) -> list[str]:
        """What cannot be followed, the flag's name as a string (not a ``getattr`` read) last."""
        return [*self.unknown, *(why for why in self.spelled.values() if why)]

    def start(self, parameter: ast.arg, role: str) -> Value:
        """What a parameter standing for ``role`` (self, or the config) is to the walker."""
        kind = Kind.SELF if role == SELF else Kind.HOLDER
        return frozenset({Origin(kind, parameter, note=role)})

    def role(self, node: ast.AST) -> str | None:
        """What ``node`` stands for: self, the config, the flag, or ``None`` (where a read the
        lift hides joins one it does not, the one it does not)."""
        if not isinstance(node, _READS):
            return None
        origins = flatten(self.walker.values.get(node, frozenset()))
        for kind in (Kind.SOURCE, Kind.HOLDER, Kind.SELF):
            notes = {o.note for o in origins if o.kind is kind}
            if notes:
                return max(notes)  # "real flag" over "flag", "real config" over "config"
        return None

    def flag_reads(self, node: ast.AST) -> Iterator[ast.expr]:
        """The reads of the flag in ``node``'s tree (a name standing for one counts)."""
        if isinstance(node, ast.expr) and self.role(node) in (FLAG, REAL_FLAG):
            yield node
            return
        for child in ast.iter_child_nodes(node):
            yield from self.flag_reads(child)

    def truth(self, node: ast.expr, defs: dict[str, Definition], flag: bool | None) -> bool | None:
        """``node``'s truth on the chosen runner with the flag read as ``flag``."""
        if isinstance(node, ast.Name) and node.id in defs:
            written, earlier = defs[node.id]
            return self.truth(written, earlier, flag)
        if self.role(node) in (FLAG, REAL_FLAG):
            return flag
        if isinstance(node, ast.Constant):
            return bool(node.value)
        if isinstance(node, ast.NamedExpr):
            return self.truth(node.value, defs, flag)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            inner = self.truth(node.operand, defs, flag)
            return None if inner is None else not inner
        if isinstance(node, ast.BoolOp):
            values = [self.truth(value, defs, flag) for value in node.values]
            decisive = isinstance(node.op, ast.Or)  # True decides an `or`, False an `and`
            if decisive in values:
                return decisive
            return None if None in values else not decisive
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            return self._compare(node, defs, flag)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "bool"
            and len(node.args) == 1
        ):
            return self.truth(node.args[0], defs, flag)
        return self._runner_truth(node)

    def _compare(
        self, node: ast.Compare, defs: dict[str, Definition], flag: bool | None
    ) -> bool | None:
        left, right, op = node.left, node.comparators[0], node.ops[0]
        if isinstance(left, ast.Constant):
            left, right = right, left
        if not isinstance(right, ast.Constant) or not isinstance(right.value, bool):
            return None
        value = self.truth(left, defs, flag)
        if value is None:
            return None
        if isinstance(op, (ast.Is, ast.Eq)):
            return value == right.value
        if isinstance(op, (ast.IsNot, ast.NotEq)):
            return value != right.value
        return None

    def _runner_truth(self, node: ast.expr) -> bool | None:
        """Tests that name a runner backend, decided for the chosen runner."""
        if isinstance(node, ast.Call) and not node.args and not node.keywords:
            name = node.func.attr if isinstance(node.func, ast.Attribute) else None
            if name and name.startswith("is_") and name[3:] in self.backends:
                return name[3:] == self.runner
            return None
        name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", None)
        for backend in self.backends:
            if name in (f"enable_{backend}_moe", f"enable_{backend}", f"use_{backend}"):
                return backend == self.runner
        return None

    def read(self, name: str, at: ast.AST, base: Callable[[], Value]) -> Value | None:
        """``self.<holder>`` is the holder, ``<holder>.<flag>`` the flag the lift hides (where
        what they are read from can be nothing else)."""
        if name == self.holder:
            if _only(base(), Kind.SELF, SELF):
                note = CONFIG if self.hidden else REAL_CONFIG
                return frozenset({Origin(Kind.HOLDER, at, note=note)})
            return None
        if name == self.flag:
            self.spelled[at] = ""  # a getattr's name is a read, not a spelling
            note = FLAG if _only(base(), Kind.HOLDER, CONFIG) else REAL_FLAG
            return frozenset({Origin(Kind.SOURCE, at, note=note)})
        return None

    def sides(
        self, node: ast.If | ast.IfExp | ast.Assert, env: Env, rest: list[ast.stmt]
    ) -> tuple[Side, Side]:
        if isinstance(node, ast.IfExp):
            return None, None
        reads = list(self.flag_reads(node.test))
        if isinstance(node, ast.Assert):
            if reads:
                self.assertion(node, reads, env)
            return None, None
        if not reads:
            return _off(self.truth(node.test, env.defs, None))
        lifted = self.truth(node.test, env.defs, False)
        flagged = self.truth(node.test, env.defs, True)
        if lifted is None or lifted == flagged:
            self.note(self.unknown, env, node, "a test of the flag this reader cannot decide")
            return None, None
        other = node.orelse if lifted else node.body
        if self.raises(other + rest, env):
            condition = flagged is None and _compares(node.test, self.condition)
            when = f" {self.condition_note}" if condition else ""
            self.rejection(reads, env, node, f"raise {_raised(other + rest)}{when}")
            return _off(lifted)
        self.note(self.uses, env, reads[0], "decides what runs")
        return None, None

    def assertion(self, node: ast.Assert, reads: list[ast.expr], env: Env) -> None:
        lifted = self.truth(node.test, env.defs, False)
        flagged = self.truth(node.test, env.defs, True)
        if lifted is True and flagged is not True:
            self.rejection(reads, env, node, "assert")
            return
        why = "passes whatever it reads" if lifted is True else "the flag read as False fails"
        self.note(self.unknown, env, node, f"an assert on the flag that {why}")

    def raises(self, body: list[ast.stmt], env: Env) -> bool:
        """Whether ``body`` always ends in a raise on the chosen runner with the flag set."""
        for index, statement in enumerate(body):
            if isinstance(statement, ast.Raise):
                return True
            if isinstance(statement, (ast.Return, ast.Break, ast.Continue)):
                return False
            if isinstance(statement, ast.If):
                decided = self.truth(statement.test, env.defs, True)
                rest = body[index + 1 :]
                live = [
                    b
                    for b, v in ((statement.body, True), (statement.orelse, False))
                    if decided in (None, v)
                ]
                return all(self.raises(b + rest, env) for b in live)
            if isinstance(statement, ast.Expr) and self._helper_raises(statement.value, env):
                return True
        return False

    def _helper_raises(self, node: ast.expr, env: Env) -> bool:
        """A call of a helper whose body always raises."""
        readable = self._readable(node, env) if isinstance(node, ast.Call) else []
        for callee in readable[:1]:
            return self.raises(getattr(callee.node, "body", []), Env(context=callee.context))
        return False

    def _readable(self, call: ast.Call, env: Env) -> list[Callee]:
        """The package's functions ``call`` runs that can be read."""
        func = call.func
        receiver = self.walker.values.get(func.value) if isinstance(func, ast.Attribute) else None
        callees = self.walker.code.callees(call, env, receiver) or []
        return [callee for callee in callees if callee.node is not None]

    def follows(self, call: Arguments) -> bool:
        return bool(self._handed_values(call)) or self._on_self(call)

    def unfollowed(self, call: Arguments, env: Env, callee: Callee | None) -> None:
        """A call handed self, the config or the flag, not followed: the flag handed on is a
        use; self or the config handed to code this reader cannot read is unknown."""
        handed = self._handed_values(call)
        if not (handed or self._on_self(call)) or (callee is not None and callee.harmless):
            return
        what = ast.unparse(call.node.func)  # type: ignore[attr-defined]
        opaque = [v for v in handed if self._handed(v, objects_only=True)]
        if opaque or (callee is None and not handed):
            given = ast.unparse(opaque[0]) if opaque else "self"
            why = f"hands {given} to {what}, which this reader cannot read"
            self.note(self.unknown, env, call.node, why)
        else:
            self.note(self.uses, env, handed[0], f"hands it to {what}")

    def evaluated(self, node: ast.expr, value: Value, env: Env, position: str) -> None:
        if isinstance(node, ast.Name) and self._unset(node, value, env):
            self.note(self.unknown, env, node, f"reads {node.id} before it is set")
            return
        if isinstance(node, ast.Constant) and node.value == self.flag:
            self.spelled.setdefault(node, f"names the flag as a string at {_where(env, node)}")
            return
        if position == STORE:
            if isinstance(node, ast.Attribute) and node.attr == self.flag:
                self.note(self.unknown, env, node, "writes the flag")
            return
        if position != PLAIN:
            return
        if isinstance(node, ast.BoolOp | ast.IfExp):
            self.gated_calls(node, env)
        if self.role(node) not in (FLAG, REAL_FLAG) or isinstance(node, ast.NamedExpr):
            return
        through = f" through {node.id}" if isinstance(node, ast.Name) else ""
        self.note(self.uses, env, node, f"reads it{through}")

    def _unset(self, node: ast.Name, value: Value, env: Env) -> bool:
        """A local read where no path walked has set it (Python raises); not in a loop."""
        context = env.context
        if not isinstance(context, LiveContext) or value != {Origin(Kind.OPAQUE, node)}:
            return False
        if env.lookup(node.id) is not None:
            return False
        if context.node not in self.scopes:
            self.scopes[context.node] = _scope(context.node)
        stored, looped = self.scopes[context.node]
        return node.id in stored and node not in looped

    def gated_calls(self, node: ast.BoolOp | ast.IfExp, env: Env) -> None:
        """``flag and check()``, ``check() if flag else x``: may be an unseen rejection."""
        if isinstance(node, ast.IfExp):
            decided = [node.body, node.orelse] if list(self.flag_reads(node.test)) else []
        else:
            first = next((i for i, v in enumerate(node.values) if list(self.flag_reads(v))), None)
            decided = [] if first is None else node.values[first + 1 :]
        for part in decided:
            for call in (n for n in ast.walk(part) if isinstance(n, ast.Call)):
                if self._readable(call, env):
                    why = f"the flag decides whether {ast.unparse(call.func)} runs"
                    self.note(self.unknown, env, node, why)
                    return

    def cannot_follow(self, node: ast.AST, env: Env, why: str) -> None:
        self.note(self.unknown, env, node, why)

    def memo_key(self, value: Value) -> Hashable:
        """Runs differ by what the parameters stand for (self, the config, the flag)."""
        kinds = (Kind.SELF, Kind.HOLDER, Kind.SOURCE)
        return frozenset((o.kind, o.note) for o in flatten(value) if o.kind in kinds)

    def _handed_values(self, call: Arguments) -> list[ast.expr]:
        node = call.node
        if not isinstance(node, ast.Call):
            return []
        values = [*node.args, *(keyword.value for keyword in node.keywords)]
        return [value for value in values if self._handed(value)]

    def _on_self(self, call: Arguments) -> bool:
        func = getattr(call.node, "func", None)
        return isinstance(func, ast.Attribute) and (
            self.role(func.value) == SELF or is_super(func.value)
        )

    def _handed(self, node: ast.expr, objects_only: bool = False) -> bool:
        """Whether ``node`` hands a callee self, the config or the flag (``objects_only``: not
        the flag's value)."""
        role = self.role(node)
        if role is not None:
            return not objects_only or role in (SELF, CONFIG, REAL_CONFIG)
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return any(self._handed(element, objects_only) for element in node.elts)
        if isinstance(node, ast.Dict):
            values = [v for v in node.values if v is not None]
            return any(self._handed(v, objects_only) for v in values)
        return not objects_only and bool(list(self.flag_reads(node)))

    def rejection(self, reads: list[ast.expr], env: Env, node: ast.AST, how: str) -> None:
        real = [r for r in reads if self.role(r) == REAL_FLAG]
        if real:
            why = f"rejects it through {ast.unparse(real[0])}, which the lift does not hide"
            self.note(self.unknown, env, node, why)
            return
        self.note(self.rejections, env, node, how)

    @staticmethod
    def note(found: list[str], env: Env, node: ast.AST, what: str) -> None:
        line = f"{what} at {_where(env, node)}"
        if line not in found:
            found.append(line)


def _where(env: Env, node: ast.AST) -> str:
    context = env.context
    return context.where(node) if isinstance(context, LiveContext) else "?"


def _only(value: Value, kind: Kind, note: str) -> bool:
    origins = flatten(value)
    return bool(origins) and all(o.kind is kind and o.note == note for o in origins)


def _scope(function: ast.AST) -> tuple[set[str], set[ast.AST]]:
    """The names a function sets in its own scope, and the nodes inside its loops."""
    stored: set[str] = set()
    looped: set[ast.AST] = set()

    def visit(node: ast.AST, in_loop: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                continue  # a scope of its own
            if isinstance(child, ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp):
                continue
            if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store):
                stored.add(child.id)
            if in_loop:
                looped.add(child)
            visit(child, in_loop or isinstance(child, ast.For | ast.AsyncFor | ast.While))

    visit(function, False)
    return stored, looped


def _off(decided: bool | None) -> tuple[Side, Side]:
    """The side a decided test keeps off the path."""
    if decided is None:
        return None, None
    return (None, OFF_PATH) if decided else (OFF_PATH, None)


def _raised(body: list[ast.stmt]) -> str:
    for node in ast.walk(ast.Module(body=body, type_ignores=[])):
        if isinstance(node, ast.Raise) and node.exc is not None:
            exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            return ast.unparse(exc)
    return "(a helper)"


def _compares(test: ast.expr, name: str) -> bool:
    """Whether ``test`` compares a ``name`` (``flag and cfg.top_k > 1``)."""
    compares = (n for n in ast.walk(test) if isinstance(n, ast.Compare))
    sides = (side for node in compares for side in (node.left, *node.comparators))
    return bool(name) and any(
        getattr(side, "attr", getattr(side, "id", "")) == name for side in sides
    )
