"""The walk of statements: assignments, branches on the FP8 path, loops, ``try``, ``with``,
``match`` and nested functions (the expressions in them: :mod:`.walk_expressions`)."""

from __future__ import annotations

import ast

from sglang_nvfp4_patches.gemma4_attention.root_cause.heuristics import (
    OTHER,
    absent_side,
    fp8_sides,
)
from sglang_nvfp4_patches.gemma4_attention.root_cause.values import (
    BOTTOM,
    Function,
    Kind,
    Origin,
    Tup,
    Value,
    as_fallback,
    combine,
    has,
)
from sglang_nvfp4_patches.gemma4_attention.root_cause.walk_state import (
    Env,
    Invocation,
    WalkerBase,
    join_env,
    targets,
)


class Statements(WalkerBase):
    """Statements: a block runs statement by statement on one :class:`Env`; branches the FP8
    path does not take are not walked, and both ends of a branch are joined."""

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
            return None if fp8_sides(node.test, env.flags)[0] == OTHER else env
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
                sides = fp8_sides(node.value, env.flags)
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
        when_true, when_false = fp8_sides(node.test, env.flags)
        guard = has(self.test_value(node.test, env), Kind.V_SCALE)
        absent = absent_side(node.test) if guard else ""
        ends: dict[str, Env | None] = {}
        for side, body, off in (
            ("body", node.body, when_true == OTHER),
            ("orelse", node.orelse, when_false == OTHER),
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
                    if value != theirs and has(theirs, Kind.V_SCALE):
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
