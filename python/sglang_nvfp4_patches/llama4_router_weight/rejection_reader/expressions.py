"""Expressions: every read of the flag and every call in an expression, and what a call
hands its callee."""

from __future__ import annotations

import ast
import inspect

from sglang_nvfp4_patches.llama4_router_weight.flag_free_view import FLAG
from sglang_nvfp4_patches.llama4_router_weight.rejection_reader.frame import (
    FLAG_NAME,
    Frame,
    Kind,
    ReaderBase,
    getattr_read,
    is_super,
)


class Expressions(ReaderBase):
    """Every read and call in an expression judged; a call handed self, the config or the
    flag followed."""

    def visit_except(self, node: ast.AST, skip: list[ast.expr], frame: Frame) -> None:
        """Visit ``node`` but for the flag reads already judged (``skip``) and the locals
        that stand for them."""
        if any(node is read for read in skip):
            return
        if isinstance(node, ast.Name) and node.id in frame.derived:
            return
        if isinstance(node, ast.Call):
            self.visit(node, frame)
            return
        if isinstance(node, ast.Attribute):
            self.attribute(node, frame)
        for child in ast.iter_child_nodes(node):
            self.visit_except(child, skip, frame)

    def visit(self, node: ast.AST, frame: Frame) -> None:
        """Judge every read and call in an expression (or a statement's expressions)."""
        if isinstance(node, ast.Call):
            self.call(node, frame)
            return
        kind = self.kind(node, frame) if isinstance(node, ast.expr) else None
        if kind in (Kind.FLAG, Kind.REAL_FLAG):
            self.use([node], frame, "reads it")  # type: ignore[list-item]
            return
        if isinstance(node, ast.Name) and node.id in frame.derived:
            reads = list(self.flag_reads(node, frame))
            if reads:
                self.use(reads, frame, f"reads it through {node.id}")
            return
        if isinstance(node, ast.Constant) and node.value == FLAG:
            self.unknown(frame, node, "names the flag as a string")
            return
        if isinstance(node, ast.Attribute):
            self.attribute(node, frame)
        if isinstance(node, (ast.BoolOp, ast.IfExp)):
            self.gated_calls(node, frame)
        for child in ast.iter_child_nodes(node):
            self.visit(child, frame)

    def gated_calls(self, node: ast.BoolOp | ast.IfExp, frame: Frame) -> None:
        """``flag and check()``, ``check() if flag else x``: the flag decides whether
        SGLang code runs, which may be a rejection this reader cannot see as one."""
        if isinstance(node, ast.IfExp):
            decided = [node.body, node.orelse] if list(self.flag_reads(node.test, frame)) else []
        else:
            first = next(
                (i for i, v in enumerate(node.values) if list(self.flag_reads(v, frame))), None
            )
            decided = [] if first is None else node.values[first + 1 :]
        for part in decided:
            for call in (n for n in ast.walk(part) if isinstance(n, ast.Call)):
                target = self.resolve(call, frame)
                if target is not None and target[0] is not None:
                    what = ast.unparse(call.func)
                    self.unknown(frame, node, f"the flag decides whether {what} runs")
                    return

    def attribute(self, node: ast.Attribute, frame: Frame) -> None:
        if node.attr == FLAG and not isinstance(node.ctx, ast.Load):
            self.unknown(frame, node, "writes the flag")
            return
        if isinstance(node.ctx, ast.Load) and self.kind(node.value, frame) is Kind.SELF:
            found = inspect.getattr_static(self.owner, node.attr, None)
            if isinstance(found, property) and found.fget is not None and self.own(found.fget):
                self.follow(found.fget, [node.value], {}, frame, node)

    def call(self, node: ast.Call, frame: Frame) -> None:
        read_name = getattr_read(node)
        if read_name is not None:  # as the attribute read it spells
            read = ast.copy_location(
                ast.Attribute(value=node.args[0], attr=read_name, ctx=ast.Load()), node
            )
            self.visit(read, frame)
            for extra in node.args[2:]:
                self.visit(extra, frame)
            return
        values = [*node.args, *(keyword.value for keyword in node.keywords)]
        handed = [value for value in values if self._handed(value, frame)]
        on_self = isinstance(node.func, ast.Attribute) and (
            self.kind(node.func.value, frame) is Kind.SELF or is_super(node.func.value)
        )
        if handed or on_self:
            self.hand_over(node, handed, frame)
        if not isinstance(node.func, ast.Name):
            self.visit(node.func, frame)
        for value in values:
            if not any(value is done for done in handed):
                self.visit(value, frame)

    def hand_over(self, node: ast.Call, handed: list[ast.expr], frame: Frame) -> None:
        """A call that is handed self, the config or the flag, or runs on self: follow it
        where it is SGLang's own code; else the flag handed on is a use, and self or the
        config handed to code this reader cannot read is unknown."""
        target = self.resolve(node, frame)
        starred = any(isinstance(a, ast.Starred) for a in node.args)
        if target is not None and target[0] is not None and not starred:
            keywords = {keyword.arg: keyword.value for keyword in node.keywords}
            self.follow(target[0], [*target[1], *node.args], keywords, frame, node)
            return
        if target is not None and target[1] == ["harmless"]:
            return
        what = ast.unparse(node.func)
        opaque = [v for v in handed if self._handed(v, frame, objects_only=True)]
        if opaque or (target is None and not handed):
            given = ast.unparse(opaque[0]) if opaque else "self"
            self.unknown(frame, node, f"hands {given} to {what}, which this reader cannot read")
        else:
            self.use(handed, frame, f"hands it to {what}")

    def portable(self, node: ast.expr, frame: Frame) -> ast.expr | None:
        """``node`` with its flag reads as the name ``FLAG_NAME``, where nothing else in it
        depends on the caller's names (``not cfg.flag``, ``flag is False``)."""
        reads = [id(read) for read in self.flag_reads(node, frame)]

        def rebuilt(part: ast.expr) -> ast.expr | None:
            if id(part) in reads:
                return ast.copy_location(ast.Name(id=FLAG_NAME, ctx=ast.Load()), part)
            if isinstance(part, ast.Name) and part.id in frame.derived:
                return rebuilt(frame.derived[part.id])
            if isinstance(part, ast.Constant):
                return part
            if isinstance(part, ast.UnaryOp):
                operand = rebuilt(part.operand)
                return None if operand is None else ast.UnaryOp(op=part.op, operand=operand)
            if isinstance(part, ast.BoolOp):
                values = [rebuilt(value) for value in part.values]
                if any(value is None for value in values):
                    return None
                return ast.BoolOp(op=part.op, values=values)  # type: ignore[arg-type]
            if isinstance(part, ast.Compare) and len(part.ops) == 1:
                left, right = rebuilt(part.left), rebuilt(part.comparators[0])
                if left is None or right is None:
                    return None
                return ast.Compare(left=left, ops=part.ops, comparators=[right])
            return None

        return rebuilt(node)

    def _handed(self, node: ast.expr, frame: Frame, objects_only: bool = False) -> bool:
        """Whether ``node`` hands a callee self, the config or the flag (``objects_only``:
        self or the config, not only the flag's value)."""
        kind = self.kind(node, frame)
        if kind is not None:
            return not objects_only or kind in (Kind.SELF, Kind.CONFIG, Kind.REAL_CONFIG)
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return any(self._handed(element, frame, objects_only) for element in node.elts)
        if isinstance(node, ast.Dict):
            values = [v for v in node.values if v is not None]
            return any(self._handed(v, frame, objects_only) for v in values)
        return not objects_only and bool(list(self.flag_reads(node, frame)))
