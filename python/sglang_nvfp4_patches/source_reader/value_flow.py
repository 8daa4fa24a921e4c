"""A value-flow reading of one module's source text: where the value a call is handed can
come from (pure: ``ast`` only; the module is parsed, never imported).

:class:`ValueFlow` is an abstract interpretation. It runs every function that reaches a sink
(:func:`.call_graph.roots`), each with its parameters unknown; follows its statements (a
block on one :class:`.flow_state.Env`; branches a test keeps off the path are not walked, the
ends of a branch are joined; loops twice), its expressions (names, attributes, tuples,
arithmetic, conditionals, lambdas, comprehensions) and its calls (this module's functions and
methods, ``self.``/class helpers and closures, run with the call's arguments bound, once per
distinct set; anything else is opaque). What a sink is handed is recorded as the set of
:class:`.values.Origin` it can come from: the source, a constant, a fallback (a constant used
where a test says the source is missing), a parameter, or opaque. The question
(:class:`.flow_state.FlowQuestion`) names the source, the sinks and the path.

One class, one file: the walk of any node, statement or expression, stays here.
"""

from __future__ import annotations

import ast

from sglang_nvfp4_patches.source_reader.binding import defaults, pair
from sglang_nvfp4_patches.source_reader.call_graph import roots
from sglang_nvfp4_patches.source_reader.flow_state import (
    MAX_DEPTH,
    OFF_PATH,
    Arguments,
    Comprehension,
    Env,
    FlowQuestion,
    Invocation,
    join_env,
)
from sglang_nvfp4_patches.source_reader.sources import ModuleIndex
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


class ValueFlow:
    """Walks a module for one :class:`.flow_state.FlowQuestion`; ``sinks`` holds the
    answer."""

    def __init__(self, tree: ast.Module, question: FlowQuestion) -> None:
        self.question = question
        index = ModuleIndex.of(tree)
        self.functions = index.functions  # this module's functions by name
        self.static = index.static  # those that are staticmethods
        self.class_names = index.class_names  # class attributes by class
        self.sinks: dict[ast.Call, set[Origin]] = {}  # each sink, and what its value comes from
        self.memo: dict[tuple[int, tuple[Value, ...]], Value] = {}  # a result per argument set
        self.stack: list[Function] = []  # the functions running now
        self.module = Env()  # names read while the module body runs: none yet
        self.module = self.block(tree.body, Env(), Invocation()) or Env()

    def walk_roots(self, lines: list[str]) -> None:
        """Every function :func:`call_graph.roots` names, each run with its parameters unknown
        (their in-module callers pass real values)."""
        for name in roots(self.functions, lines, self.question.sink_prefix):
            for fn in self.functions[name]:
                env = Env()
                params = [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]
                params += [p for p in (fn.args.vararg, fn.args.kwarg) if p is not None]
                for param in params:
                    env.names[param.arg] = frozenset(
                        {Origin(Kind.PARAMETER, param, function=fn.name, note=param.arg)}
                    )
                if params and params[0].arg in ("self", "cls"):
                    env.names[params[0].arg] = self.opaque(params[0])
                self.run(fn, env)

    def block(self, body: list[ast.stmt], env: Env | None, run: Invocation) -> Env | None:
        for statement in body:
            if env is None:
                return None
            env = self.statement(statement, env, run)
        return env

    def statement(self, node: ast.stmt, env: Env, run: Invocation) -> Env | None:
        if isinstance(node, ast.Return):
            value = self.expr(node.value, env) if node.value else frozenset()
            run.returns.append((value, run.guard()))
            return None
        if isinstance(node, ast.Raise):
            return None
        if isinstance(node, ast.Assert):
            self.expr(node.test, env)
            return None if self.question.path_sides(node.test, env.flags)[0] == OFF_PATH else env
        if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            return self.assign(node, env)
        if isinstance(node, ast.If):
            return self.branch(node, env, run)
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
                self.expr(item.context_expr, env)
                if item.optional_vars is not None:
                    opaque = frozenset({Origin(Kind.OPAQUE, item.context_expr)})
                    self.bind(item.optional_vars, opaque, env)
            return self.block(node.body, env, run)
        if isinstance(node, ast.Match):
            self.expr(node.subject, env)
            end = env
            for case in node.cases:
                end = join_env(end, self.block(case.body, env.copy(), run))
            return end
        if isinstance(node, Function):
            env.closures[node.name] = node
            env.names.pop(node.name, None)
            return env
        if isinstance(node, ast.Expr):
            self.expr(node.value, env)
        return env

    def assign(self, node: ast.Assign | ast.AnnAssign | ast.AugAssign, env: Env) -> Env:
        if node.value is None:
            return env
        value = self.expr(node.value, env)
        if isinstance(node, ast.AugAssign):
            value = combine([self.expr(node.target, env), value], node)
        for target in targets(node):
            self.bind(target, value, env)
            if isinstance(target, ast.Name):
                sides = self.question.path_sides(node.value, env.flags)
                if sides != (None, None) and not isinstance(node, ast.AugAssign):
                    env.flags[target.id] = sides
                else:
                    env.flags.pop(target.id, None)
        return env

    def bind(self, target: ast.expr, value: Value, env: Env) -> None:
        if isinstance(target, ast.Name):
            env.names[target.id] = value
            env.closures.pop(target.id, None)
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

    def branch(self, node: ast.If, env: Env, run: Invocation) -> Env | None:
        self.expr(node.test, env)  # calls in the test run, and `:=` binds, before either side
        when_true, when_false = self.question.path_sides(node.test, env.flags)
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
            self.expr(node.iter, env)
        else:
            self.expr(node.test, env)
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
        if self.question.source_name.fullmatch(node.attr):
            return frozenset({Origin(Kind.SOURCE, node)})
        base = node.value
        if isinstance(base, ast.Name):
            owners = (
                list(self.class_names.values())
                if base.id in ("self", "cls")
                else [self.class_names.get(base.id, {})]
            )
            for attrs in owners:
                if node.attr in attrs:
                    return self.expr(attrs[node.attr], self.module)
        base_value = (
            self.reference(base, env) if isinstance(base, ast.Name | ast.Attribute) else None
        )
        if base_value is not None and has(base_value, Kind.SOURCE):
            return frozenset(o for o in flatten(base_value) if o.kind is Kind.SOURCE)
        return frozenset({Origin(Kind.OPAQUE, node)})

    def expr(self, node: ast.expr, env: Env) -> Value:
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
        """Walk a lambda's body (a sink called in it is still reached), with its
        parameters unknown rather than the enclosing names they shadow."""
        for default in (*node.args.defaults, *node.args.kw_defaults):
            if default is not None:
                self.expr(default, env)
        local = Env(parent=env)
        for param in ast.walk(node.args):
            if isinstance(param, ast.arg):
                local.names[param.arg] = self.opaque(param)
        self.expr(node.body, local)

    def comprehension(self, node: Comprehension, env: Env) -> None:
        """Walk a comprehension's iterables, conditions and element, with its loop targets
        unknown rather than the enclosing names they shadow."""
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
        when_true, when_false = self.question.path_sides(node.test, env.flags)
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
        # From the first `*x` on, which parameter an argument meets cannot be told: those
        # arguments are walked (calls in them run) but not paired.
        starred = [isinstance(a, ast.Starred) for a in node.args]
        cut = starred.index(True) if any(starred) else len(node.args)
        args = [self.expr(a, env) for a in node.args[:cut]]
        for later in node.args[cut:]:
            self.expr(later.value if isinstance(later, ast.Starred) else later, env)
        call = Arguments(
            node,
            args,
            {k.arg: self.expr(k.value, env) for k in node.keywords if k.arg},
            cut < len(node.args) or any(k.arg is None for k in node.keywords),
        )
        if name and name.startswith(self.question.sink_prefix) and name not in self.functions:
            self.sinks.setdefault(node, set()).update(self.question.sink_value(call))
            return self.opaque(node)
        if isinstance(node.func, ast.Name):
            found = env.closure(node.func.id)
            if found is not None and env.lookup(node.func.id) is None:
                return self.call_closure(found, call, env)
        if self.module_target(node) and name is not None:
            method = isinstance(node.func, ast.Attribute)
            return join(*(self.call_function(fn, call, method) for fn in self.functions[name]))
        if name == "getattr" and len(args) >= 2:
            names = flatten(args[1])
            written = next(iter(names)) if len(names) == 1 else None
            if (
                written
                and isinstance(written.literal, str)
                and self.question.source_name.fullmatch(written.literal)
            ):
                # the evidence is where the name is written (a helper's caller, often)
                return frozenset({Origin(Kind.SOURCE, written.node)})
            return self.opaque(node)
        if isinstance(node.func, ast.Attribute):
            receiver = self.expr(node.func.value, env)
            if has(receiver, Kind.SOURCE):
                if name in self.question.constant_methods:
                    return frozenset({Origin(Kind.CONSTANT, node)})
                return combine([receiver], node)
        if name in self.question.preserving_calls and args and not call.unpaired:
            return combine(args, node)
        return self.opaque(node)

    def module_target(self, node: ast.Call) -> bool:
        """Is this a call of a function defined in this module (``f()``, ``self.f()``)?"""
        func = node.func
        if isinstance(func, ast.Name):
            return func.id in self.functions
        return (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id in ("self", "cls", *self.class_names)
            and func.attr in self.functions
        )

    def bind_params(self, fn: Function, call: Arguments, skip_first: bool) -> Env:
        env = Env()
        env.names, _, missing = pair(fn.args, call.positional, call.keywords, skip_first)
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

    def call_function(self, fn: Function, call: Arguments, method: bool) -> Value:
        """A module function, run with this call's arguments (once per distinct set)."""
        env = self.bind_params(fn, call, skip_first=method and fn not in self.static)
        key = (id(fn), tuple(env.names[name] for name in sorted(env.names)))
        if key in self.memo:
            return self.memo[key]
        if fn in self.stack or len(self.stack) >= MAX_DEPTH:
            return self.opaque(call.node, f"{fn.name}() is recursive or nested too deep")
        self.memo[key] = result = self.run(fn, env)
        return result

    def call_closure(self, found: tuple[Function, Env], call: Arguments, env: Env) -> Value:
        """A nested function sees its enclosing names as they are when it runs (now)."""
        fn, _ = found
        if fn in self.stack or len(self.stack) >= MAX_DEPTH:
            return self.opaque(call.node, f"{fn.name}() is recursive or nested too deep")
        local = self.bind_params(fn, call, skip_first=False)
        local.parent = env
        return self.run(fn, local)

    def run(self, fn: Function, env: Env) -> Value:
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
