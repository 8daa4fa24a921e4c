"""Names and three-valued truth: what an expression stands for, and whether it is true
on the CUTLASS runner with the flag read as ``True``, ``False`` or unknown."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from sglang_nvfp4_patches.llama4_router_weight.flag_free_view import FLAG
from sglang_nvfp4_patches.llama4_router_weight.rejection_reader.frame import (
    CONFIG,
    CUTLASS,
    Frame,
    Kind,
    ReaderBase,
    attribute_read,
)


class Truth(ReaderBase):
    """What a node stands for (self, the config, the flag) and its truth on the CUTLASS runner."""

    def kind(self, node: ast.expr, frame: Frame) -> Kind | None:
        """What ``node`` stands for: self, the config, the flag (or none of them)."""
        if isinstance(node, ast.Name):
            if node.id in frame.bound:
                return frame.bound[node.id]
            if node.id in frame.derived:
                return self.kind(frame.derived[node.id], frame)
            return None
        attribute = attribute_read(node)
        if attribute is None:
            return None
        base, name = attribute
        base_kind = self.kind(base, frame)
        if name == CONFIG and base_kind is Kind.SELF:
            return Kind.CONFIG if frame.hidden else Kind.REAL_CONFIG
        if name == FLAG:
            return Kind.FLAG if base_kind is Kind.CONFIG else Kind.REAL_FLAG
        return None

    def flag_reads(self, node: ast.AST, frame: Frame) -> Iterator[ast.expr]:
        """The reads of the flag in ``node``'s tree (a local standing for one counts)."""
        if isinstance(node, ast.expr) and self.kind(node, frame) in (Kind.FLAG, Kind.REAL_FLAG):
            yield node
            return
        if isinstance(node, ast.Name) and node.id in frame.derived:
            yield from self.flag_reads(frame.derived[node.id], frame)
            return
        for child in ast.iter_child_nodes(node):
            yield from self.flag_reads(child, frame)

    def truth(self, node: ast.expr, frame: Frame, flag: bool | None) -> bool | None:
        """``node``'s truth on the CUTLASS runner with the flag read as ``flag`` (``None``:
        cannot say)."""
        kind = self.kind(node, frame)
        if kind in (Kind.FLAG, Kind.REAL_FLAG):
            return flag
        if isinstance(node, ast.Name) and node.id in frame.derived:
            return self.truth(frame.derived[node.id], frame, flag)
        if isinstance(node, ast.Constant):
            return bool(node.value)
        if isinstance(node, ast.NamedExpr):
            return self.truth(node.value, frame, flag)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            inner = self.truth(node.operand, frame, flag)
            return None if inner is None else not inner
        if isinstance(node, ast.BoolOp):
            values = [self.truth(value, frame, flag) for value in node.values]
            decisive = isinstance(node.op, ast.Or)  # True decides an `or`, False an `and`
            if decisive in values:
                return decisive
            return None if None in values else not decisive
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            return self._compare(node, frame, flag)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "bool"
            and len(node.args) == 1
        ):
            return self.truth(node.args[0], frame, flag)
        return self._runner_truth(node)

    def _compare(self, node: ast.Compare, frame: Frame, flag: bool | None) -> bool | None:
        left, right, op = node.left, node.comparators[0], node.ops[0]
        if isinstance(left, ast.Constant):
            left, right = right, left
        if not isinstance(right, ast.Constant) or not isinstance(right.value, bool):
            return None
        value = self.truth(left, frame, flag)
        if value is None:
            return None
        if isinstance(op, (ast.Is, ast.Eq)):
            return value == right.value
        if isinstance(op, (ast.IsNot, ast.NotEq)):
            return value != right.value
        return None

    def _runner_truth(self, node: ast.expr) -> bool | None:
        """Tests that name a runner backend, decided for the CUTLASS runner."""
        if isinstance(node, ast.Call) and not node.args and not node.keywords:
            name = node.func.attr if isinstance(node.func, ast.Attribute) else None
            if name and name.startswith("is_") and name[3:] in self.backends:
                return name[3:] == CUTLASS
            return None
        name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", None)
        for backend in self.backends:
            if name in (f"enable_{backend}_moe", f"enable_{backend}", f"use_{backend}"):
                return backend == CUTLASS
        return None
