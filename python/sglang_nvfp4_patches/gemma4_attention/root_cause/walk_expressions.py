"""The walk of expressions: what each value can come from."""

from __future__ import annotations

import ast

from sglang_nvfp4_patches.gemma4_attention.root_cause.heuristics import (
    OTHER,
    V_SCALE_NAME,
    absent_side,
    fp8_sides,
)
from sglang_nvfp4_patches.gemma4_attention.root_cause.values import (
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
from sglang_nvfp4_patches.gemma4_attention.root_cause.walk_state import (
    Arguments,
    Comprehension,
    Env,
    WalkerBase,
)


class Expressions(WalkerBase):
    """Expressions: what a value can come from (constants, the V scale, opaque), through
    names, attributes, tuples, arithmetic and conditionals (calls: :mod:`.walk_calls`)."""

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
        if V_SCALE_NAME.fullmatch(node.attr):
            return frozenset({Origin(Kind.V_SCALE, node)})
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
        if base_value is not None and has(base_value, Kind.V_SCALE):
            return frozenset(o for o in flatten(base_value) if o.kind is Kind.V_SCALE)
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
            return combine([base], node) if has(base, Kind.V_SCALE) else self.opaque(node)
        if isinstance(node, ast.BinOp):
            left, right = self.expr(node.left, env), self.expr(node.right, env)
            if _annihilates(node):
                return frozenset({Origin(Kind.CONSTANT, node, 0)})
            return combine([left, right], node)
        if isinstance(node, ast.UnaryOp):
            return combine([self.expr(node.operand, env)], node)
        if isinstance(node, ast.BoolOp):
            values = [self.expr(value, env) for value in node.values]
            if isinstance(node.op, ast.Or):  # `v_scale or default`: default if v_scale is missing
                seen = [has(v, Kind.V_SCALE) for v in values]
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
        """Walk a lambda's body (a kernel call in it still reaches the kernel), with its
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
        when_true, when_false = fp8_sides(node.test, env.flags)
        body = BOTTOM if when_true == OTHER else self.expr(node.body, env)
        orelse = BOTTOM if when_false == OTHER else self.expr(node.orelse, env)
        if has(self.test_value(node.test, env), Kind.V_SCALE):
            absent = absent_side(node.test)
            if absent in ("body", "both") and has(orelse, Kind.V_SCALE):
                body = as_fallback(body, absent == "body")
            if absent in ("orelse", "both") and has(body, Kind.V_SCALE):
                orelse = as_fallback(orelse, absent == "orelse")
        return join(body, orelse)


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
