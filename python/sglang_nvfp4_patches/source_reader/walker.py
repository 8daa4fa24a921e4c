"""The one reader of SGLang's source: an abstract interpretation of functions, asked one
question at a time (pure: ``ast`` and ``inspect`` on what it is given; it imports nothing of
SGLang).

:class:`Walker` runs a function body on one :class:`.flow_state.Env` (branches off the path
unwalked, branch ends joined, loops twice); the code it reads (:class:`.module_code.ModuleCode`
or :class:`.live_code.LiveCode`) says which function a call runs, and the walker runs it with
the call's arguments bound, once per distinct set. Each value is the set of
:class:`.values.Origin` it can come from; what cannot be followed is opaque ("unknown"). The
question (:class:`.flow_state.FlowQuestion`) names the source, the sinks and the path, and judges
what the walk meets.
"""

from __future__ import annotations

import ast
from typing import Any

from sglang_nvfp4_patches.source_reader.binding import defaults, pair
from sglang_nvfp4_patches.source_reader.flow_state import (
    ARGUMENT,
    BOUND,
    OFF_PATH,
    PLAIN,
    STORE,
    TEST,
    Arguments,
    Callee,
    Code,
    Comprehension,
    Env,
    FlowQuestion,
    Invocation,
    join_env,
)
from sglang_nvfp4_patches.source_reader.syntax import Function, callee, targets
from sglang_nvfp4_patches.source_reader.values import (
    BOTTOM,
    Kind,
    Origin,
    Origins,
    Tup,
    Value,
    as_fallback,
    combine,
    flatten,
    has,
    join,
)


class Walker:
    """Walks the functions of ``code`` for one question; ``sinks``: what each sink is handed."""

    def __init__(self, code: Code, question: FlowQuestion) -> None:
        self.code = code  # which function a call runs
        self.question = question
        question.walker = self  # type: ignore[attr-defined]
        self.sinks: dict[ast.Call, set[Origin]] = {}  # each sink, and what its value comes from
        self.memo: dict[tuple[int, tuple[Any, ...]], Value] = {}  # a result per argument set
        self.stack: list[Function] = []  # the functions running now
        self.values: dict[ast.AST, Value] = {}  # what each expression last read as
        self.position = PLAIN  # where the expression being read stands
        self.followed = 0  # functions run for calls
        self.module = Env()  # names read while the module body runs: none yet
        self.module = self.block(list(code.module_body), Env(), Invocation()) or Env()

    def block(self, body: list[ast.stmt], env: Env | None, run: Invocation) -> Env | None:
        for index, statement in enumerate(body):
            if env is None:
                return None
            env = self.statement(statement, env, run, body[index + 1 :])
        return env

    def read_at(self, position: str, node: ast.expr, env: Env) -> Value:
        """``node`` read at ``position`` (:data:`.flow_state.TEST` ...)."""
        outer, self.position = self.position, position
        try:
            return self.expr(node, env)
        finally:
            self.position = outer

    def statement(
        self, node: ast.stmt, env: Env, run: Invocation, rest: list[ast.stmt]
    ) -> Env | None:
        if isinstance(node, ast.Return):
            value = self.read_at(PLAIN, node.value, env) if node.value else frozenset()
            run.returns.append((value, run.guard()))
            return None
        if isinstance(node, ast.Raise):
            if node.exc is not None:
                self.read_at(PLAIN, node.exc, env)
            return None
        if isinstance(node, ast.Assert):
            self.read_at(TEST, node.test, env)
            return None if self.question.sides(node, env, rest)[0] == OFF_PATH else env
        if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            return self.assign(node, env)
        if isinstance(node, ast.If):
            return self.branch(node, env, run, rest)
        if isinstance(node, ast.For | ast.AsyncFor | ast.While):
            return self.loop(node, env, run)
        if isinstance(node, ast.Break | ast.Continue):
            run.loop_exits.append(env)
            return None
        if isinstance(node, ast.Try | ast.TryStar):
            after_body = self.block(node.body, env.copy(), run)
            raised = join_env(env, after_body)
            ends = [self.block(h.body, raised.copy(), run) for h in node.handlers if raised]
            ends.append(self.block(node.orelse, after_body, run))
            end: Env | None = None
            for one in ends:
                end = join_env(end, one)
            return self.block(node.finalbody, end, run) if node.finalbody else end
        if isinstance(node, ast.With | ast.AsyncWith):
            for item in node.items:
                self.read_at(PLAIN, item.context_expr, env)
                if item.optional_vars is not None:
                    opaque = frozenset({Origin(Kind.OPAQUE, item.context_expr)})
                    self.bind(item.optional_vars, opaque, env)
            return self.block(node.body, env, run)
        if isinstance(node, ast.Match):
            self.read_at(PLAIN, node.subject, env)
            end = env
            for case in node.cases:
                end = join_env(end, self.block(case.body, env.copy(), run))
            return end
        if isinstance(node, Function):
            env.closures[node.name] = node
            env.names.pop(node.name, None)
            return env
        if isinstance(node, ast.Expr):
            self.read_at(PLAIN, node.value, env)
        return env

    def assign(self, node: ast.Assign | ast.AnnAssign | ast.AugAssign, env: Env) -> Env:
        if node.value is None:
            return env
        named = targets(node)
        simple = len(named) == 1 and isinstance(named[0], ast.Name)
        plain = isinstance(node, ast.AugAssign) or not simple
        value = self.read_at(PLAIN if plain else BOUND, node.value, env)
        if isinstance(node, ast.AugAssign):
            value = combine([self.read_at(PLAIN, node.target, env), value], node)
        for target in named:
            self.bind(target, value, env)
        if not plain:
            self.define(named[0], node.value, env)  # type: ignore[arg-type]
        return env

    @staticmethod
    def define(target: ast.Name, value: ast.expr, env: Env) -> None:
        """``target`` now stands for ``value``, with the definitions its names have now."""
        env.defs[target.id] = (value, dict(env.defs))

    def bind(self, target: ast.expr, value: Value, env: Env) -> None:
        if isinstance(target, ast.Name):
            env.names[target.id] = value
            env.closures.pop(target.id, None)
            env.defs.pop(target.id, None)
        elif isinstance(target, ast.Tuple | ast.List):
            starred = any(isinstance(e, ast.Starred) for e in target.elts)
            paired = isinstance(value, Tup) and len(value.items) == len(target.elts)
            for index, element in enumerate(target.elts):
                if isinstance(value, Tup) and paired and not starred:
                    self.bind(element, value.items[index], env)
                elif isinstance(value, Tup) or starred:
                    self.bind(element, frozenset({Origin(Kind.OPAQUE, target)}), env)
                else:
                    self.bind(element, value, env)
        elif isinstance(target, ast.Starred):
            self.bind(target.value, frozenset({Origin(Kind.OPAQUE, target)}), env)
        else:
            self.question.evaluated(target, BOTTOM, env, STORE)

    def branch(self, node: ast.If, env: Env, run: Invocation, rest: list[ast.stmt]) -> Env | None:
        self.read_at(TEST, node.test, env)  # calls in the test run, `:=` binds, before a side
        when_true, when_false = self.question.sides(node, env, rest)
        guard = has(self.test_value(node.test, env), Kind.SOURCE)
        absent = absent_side(node.test) if guard else ""
        ends: dict[str, Env | None] = {}
        for side, body, off in (
            ("body", node.body, when_true == OFF_PATH),
            ("orelse", node.orelse, when_false == OFF_PATH),
        ):
            if off:
                ends[side] = None
                continue
            maybe, definite = absent == "both", absent == side
            run.maybe_absent += maybe
            run.absent += definite
            ends[side] = self.block(body, env.copy(), run)
            run.maybe_absent -= maybe
            run.absent -= definite
        body_end, orelse_end = ends["body"], ends["orelse"]
        if guard and body_end is not None and orelse_end is not None:
            for side, mine, other in (
                ("body", body_end, orelse_end),
                ("orelse", orelse_end, body_end),
            ):
                if absent not in (side, "both"):
                    continue
                for name, value in mine.names.items():
                    theirs = other.names.get(name, BOTTOM)
                    if value != theirs and has(theirs, Kind.SOURCE):
                        mine.names[name] = as_fallback(value, absent == side)
        return join_env(body_end, orelse_end)

    def loop(self, node: ast.For | ast.AsyncFor | ast.While, env: Env, run: Invocation) -> Env:
        if isinstance(node, ast.For | ast.AsyncFor):
            self.read_at(PLAIN, node.iter, env)
        else:
            self.read_at(PLAIN, node.test, env)
        outer_exits, run.loop_exits = run.loop_exits, []
        state = env
        for _ in range(2):  # twice: values set late in the body reach its start once
            entry = state.copy()
            if isinstance(node, ast.For | ast.AsyncFor):
                self.bind(node.target, frozenset({Origin(Kind.OPAQUE, node.target)}), entry)
            state = join_env(state, self.block(node.body, entry, run)) or state
        for exit_env in run.loop_exits:
            state = join_env(state, exit_env) or state
        run.loop_exits = outer_exits
        return self.block(node.orelse, state, run) or env

    def test_value(self, test: ast.expr, env: Env) -> Origins:
        """What a test reads (names and attributes), without following calls."""
        found: set[Origin] = set()
        for node in ast.walk(test):
            if isinstance(node, ast.Name | ast.Attribute):
                found |= flatten(self.reference(node, env))
        return frozenset(found)

    def reference(self, node: ast.Name | ast.Attribute, env: Env) -> Value:
        if isinstance(node, ast.Name):
            value = env.lookup(node.id)
            if value is None:
                value = self.module.names.get(node.id)
            return value if value is not None else frozenset({Origin(Kind.OPAQUE, node)})
        base = node.value

        def base_value() -> Value:
            if isinstance(base, ast.Name | ast.Attribute):
                return self.reference(base, env)
            return self.values.get(base, self.opaque(base))

        found = self.question.read(node.attr, node, base_value)
        if found is not None:
            return found
        written = self.code.class_value(node)
        if written is not None:
            return self.expr(written, self.module)
        if not isinstance(base, ast.Name | ast.Attribute):
            return frozenset({Origin(Kind.OPAQUE, node)})
        value = self.reference(base, env)
        getter = self.code.property(node, value)
        if getter is not None:
            call = Arguments(node, [], {}, False)
            return self.follow(getter, call, env)
        if has(value, Kind.SOURCE):
            return frozenset(o for o in flatten(value) if o.kind is Kind.SOURCE)
        return frozenset({Origin(Kind.OPAQUE, node)})

    def expr(self, node: ast.expr, env: Env) -> Value:
        """What ``node`` can come from; the question hears of each read."""
        value = self.value(node, env)
        self.values[node] = value
        self.question.evaluated(node, value, env, self.position)
        return value

    def value(self, node: ast.expr, env: Env) -> Value:
        if isinstance(node, ast.Constant):
            return frozenset({Origin(Kind.CONSTANT, node, node.value)})
        if isinstance(node, ast.Name):
            found = env.closure(node.id)
            if found is not None and env.lookup(node.id) is None:
                self.call_closure(found, Arguments(node, [], {}, True), env)
                return frozenset({Origin(Kind.OPAQUE, node)})
            return self.reference(node, env)
        if isinstance(node, ast.Attribute):
            if not isinstance(node.value, ast.Name):
                self.expr(node.value, env)
            return self.reference(node, env)
        if isinstance(node, ast.Tuple | ast.List):
            if any(isinstance(e, ast.Starred) for e in node.elts):
                for element in node.elts:
                    self.expr(element, env)
                return frozenset({Origin(Kind.OPAQUE, node)})
            return Tup(tuple(self.expr(element, env) for element in node.elts))
        if isinstance(node, ast.Subscript):
            base = self.expr(node.value, env)
            self.expr(node.slice, env)
            if isinstance(base, Tup):
                index = _int_literal(node.slice)
                if index is not None and -len(base.items) <= index < len(base.items):
                    return base.items[index]
                return flatten(base) or self.opaque(node)  # an unread index may pick any item
            return combine([base], node) if has(base, Kind.SOURCE) else self.opaque(node)
        if isinstance(node, ast.BinOp):
            left, right = self.expr(node.left, env), self.expr(node.right, env)
            if _annihilates(node):
                return frozenset({Origin(Kind.CONSTANT, node, 0)})
            return combine([left, right], node)
        if isinstance(node, ast.UnaryOp):
            return combine([self.expr(node.operand, env)], node)
        if isinstance(node, ast.BoolOp):
            values = [self.expr(value, env) for value in node.values]
            if isinstance(node.op, ast.Or):  # `source or default`: default if it is missing
                seen = [has(v, Kind.SOURCE) for v in values]
                if any(seen):
                    first = seen.index(True)
                    values[first + 1 :] = [as_fallback(v, True) for v in values[first + 1 :]]
            return join(*values)
        if isinstance(node, ast.Compare):
            return join(*(self.expr(n, env) for n in (node.left, *node.comparators)))
        if isinstance(node, ast.IfExp):
            return self.if_expr(node, env)
        if isinstance(node, ast.NamedExpr):
            value = self.expr(node.value, env)
            self.bind(node.target, value, env)
            self.define(node.target, node.value, env)
            return value
        if isinstance(node, ast.Await):
            return self.expr(node.value, env)
        if isinstance(node, ast.Call):
            return self.call(node, env)
        if isinstance(node, ast.Lambda):
            self.lambda_body(node, env)
        elif isinstance(node, Comprehension):
            self.comprehension(node, env)
        else:
            for child in ast.iter_child_nodes(node):  # f-strings, slices, ...
                if isinstance(child, ast.expr):
                    self.expr(child, env)
        return self.opaque(node)

    def lambda_body(self, node: ast.Lambda, env: Env) -> None:
        """Walk a lambda's body (a sink in it is reached), its parameters unknown."""
        for default in (*node.args.defaults, *node.args.kw_defaults):
            if default is not None:
                self.expr(default, env)
        local = Env(parent=env)
        for param in ast.walk(node.args):
            if isinstance(param, ast.arg):
                local.names[param.arg] = self.opaque(param)
        self.expr(node.body, local)

    def comprehension(self, node: Comprehension, env: Env) -> None:
        """Walk a comprehension's parts, its loop targets unknown."""
        local = Env(parent=env)
        for generator in node.generators:
            self.expr(generator.iter, local)
            for target in ast.walk(generator.target):
                if isinstance(target, ast.Name):
                    local.names[target.id] = self.opaque(target)
            for condition in generator.ifs:
                self.expr(condition, local)
        parts = (node.key, node.value) if isinstance(node, ast.DictComp) else (node.elt,)
        for part in parts:
            self.expr(part, local)

    @staticmethod
    def opaque(node: ast.AST, note: str = "") -> Origins:
        return frozenset({Origin(Kind.OPAQUE, node, note=note)})

    def if_expr(self, node: ast.IfExp, env: Env) -> Value:
        self.expr(node.test, env)
        when_true, when_false = self.question.sides(node, env, [])
        body = BOTTOM if when_true == OFF_PATH else self.expr(node.body, env)
        orelse = BOTTOM if when_false == OFF_PATH else self.expr(node.orelse, env)
        if has(self.test_value(node.test, env), Kind.SOURCE):
            absent = absent_side(node.test)
            if absent in ("body", "both") and has(orelse, Kind.SOURCE):
                body = as_fallback(body, absent == "body")
            if absent in ("orelse", "both") and has(body, Kind.SOURCE):
                orelse = as_fallback(orelse, absent == "orelse")
        return join(body, orelse)

    def call(self, node: ast.Call, env: Env) -> Value:
        name = callee(node)
        # From the first `*x` on, arguments are walked (calls in them run) but not paired.
        starred = [isinstance(a, ast.Starred) for a in node.args]
        cut = starred.index(True) if any(starred) else len(node.args)
        args = [self.read_at(ARGUMENT, a, env) for a in node.args[:cut]]
        for later in node.args[cut:]:
            self.read_at(ARGUMENT, later.value if isinstance(later, ast.Starred) else later, env)
        keywords = [k for k in node.keywords if k.arg]
        call = Arguments(
            node,
            args,
            {k.arg: self.read_at(ARGUMENT, k.value, env) for k in keywords},  # type: ignore[misc]
            cut < len(node.args) or any(k.arg is None for k in node.keywords),
            (node.args[:cut], {k.arg: k.value for k in keywords}),  # type: ignore[misc]
        )
        sunk = self.question.sink(call)
        if sunk is not None:
            self.sinks.setdefault(node, set()).update(sunk)
            return self.opaque(node)
        if isinstance(node.func, ast.Name):
            found = env.closure(node.func.id)
            if found is not None and env.lookup(node.func.id) is None:
                return self.call_closure(found, call, env)
        if name == "getattr" and len(args) >= 2:
            names = flatten(args[1])
            written = next(iter(names)) if len(names) == 1 else None
            if written and isinstance(written.literal, str):
                # the evidence is where the name is written (a helper's caller, often)
                read = self.question.read(written.literal, written.node, lambda: args[0])
                return self.opaque(node) if read is None else read
        receiver = None
        if isinstance(node.func, ast.Attribute):
            receiver = self.expr(node.func.value, env)
        targets = self.code.callees(node, env, receiver)
        harmless = not targets or any(t.harmless for t in targets)
        if not harmless and self.question.follows(call):
            return join(*(self.follow(target, call, env) for target in targets))
        self.question.unfollowed(call, env, targets[0] if targets else None)
        if receiver is not None and has(receiver, Kind.SOURCE):
            if name in self.question.constant_methods:
                return frozenset({Origin(Kind.CONSTANT, node)})
            return combine([receiver], node)
        if name in self.question.preserving_calls and args and not call.unpaired:
            return combine(args, node)
        return self.opaque(node)

    def bind_params(self, fn: Function, target: Callee, call: Arguments, caller: Env) -> Env:
        env = Env(context=target.context)
        positional = [*target.bound, *call.positional]
        env.names, missing = pair(fn.args, positional, call.keywords, target.skip_first)
        nodes = [*(None for _ in target.bound), *call.expressions[0]]
        given, _ = pair(fn.args, nodes, call.expressions[1], target.skip_first)
        for param, written_as in given.items():
            if written_as is not None:
                env.defs[param] = (written_as, dict(caller.defs))
        written = defaults(fn.args)
        unknown = self.opaque(call.node, "arguments this probe cannot pair")
        for name in missing:
            if name in written and not call.unpaired:
                env.names[name] = self.expr(written[name], self.module)
            else:
                env.names[name] = unknown
        for extra in (fn.args.vararg, fn.args.kwarg):
            if extra is not None:
                env.names[extra.arg] = unknown
        return env

    def follow(self, target: Callee, call: Arguments, caller: Env) -> Value:
        """A function a call runs, with this call's arguments (once per distinct set)."""
        fn = target.node
        if fn is None:
            self.question.cannot_follow(call.node, caller, target.problem)
            return self.opaque(call.node, target.problem)
        env = self.bind_params(fn, target, call, caller)
        memo = self.question.memo_key
        key = (id(fn), tuple((name, memo(env.names[name])) for name in sorted(env.names)))
        if key in self.memo:
            return self.memo[key]
        if fn in self.stack:
            return self.opaque(call.node, f"{fn.name}() is recursive or nested too deep")
        if self.too_deep():
            self.question.cannot_follow(call.node, caller, f"{fn.name}() is nested too deep")
            return self.opaque(call.node, f"{fn.name}() is recursive or nested too deep")
        self.followed += 1
        limit = self.question.max_functions
        if limit is not None and self.followed > limit:
            self.question.cannot_follow(call.node, caller, f"more than {limit} functions to follow")
            return self.opaque(call.node)
        self.memo[key] = result = self.run(fn, env)
        return result

    def too_deep(self) -> bool:
        depth = self.question.max_depth
        return depth is not None and len(self.stack) >= depth

    def call_closure(self, found: tuple[Function, Env], call: Arguments, env: Env) -> Value:
        """A nested function sees its enclosing names as they are when it runs (now)."""
        fn, _ = found
        if fn in self.stack or self.too_deep():
            return self.opaque(call.node, f"{fn.name}() is recursive or nested too deep")
        local = self.bind_params(fn, Callee(fn, context=env.context), call, env)
        local.parent = env
        return self.run(fn, local)

    def run(self, fn: Function, env: Env) -> Value:
        """Run ``fn``'s body on ``env`` (its parameters bound); what it returns."""
        self.stack.append(fn)
        run = Invocation()
        try:
            self.block(fn.body, env, run)
        finally:
            self.stack.pop()
        plain = [value for value, guard in run.returns if not guard]
        if any(has(value, Kind.SOURCE) for value in plain):
            guarded = [as_fallback(v, g == "absent") for v, g in run.returns if g]
            return join(*plain, *guarded)
        return join(*(value for value, _ in run.returns))


def absent_side(test: ast.expr) -> str:
    """Which branch of a test on the source runs when the source is missing."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return {"body": "orelse", "orelse": "body"}.get(absent_side(test.operand), "both")
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        none = any(
            isinstance(n, ast.Constant) and n.value is None for n in (test.left, *test.comparators)
        )
        if none and isinstance(test.ops[0], ast.Is | ast.Eq):
            return "body"
        if none and isinstance(test.ops[0], ast.IsNot | ast.NotEq):
            return "orelse"
        return "both"
    return "orelse" if isinstance(test, ast.Name | ast.Attribute) else "both"


def _int_literal(node: ast.expr) -> int | None:
    """An int written in the source: ``1``, or ``-1`` (a minus applied to one)."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _int_literal(node.operand)
        return None if inner is None else -inner
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None


def _annihilates(node: ast.BinOp) -> bool:
    """``v * 0``, ``v ** 0``, ``v / v`` and ``v - v`` are constants, whatever v is."""
    if isinstance(node.op, ast.Div | ast.FloorDiv | ast.Sub | ast.Mod):
        return ast.dump(node.left) == ast.dump(node.right)
    zero = [
        side
        for side in (node.left, node.right)
        if isinstance(side, ast.Constant) and side.value == 0 and not isinstance(side.value, bool)
    ]
    if isinstance(node.op, ast.Mult):
        return bool(zero)
    return isinstance(node.op, ast.Pow) and node.right in zero
