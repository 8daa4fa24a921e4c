"""Statements: a body read as the CUTLASS runner runs it; an ``assert`` or an ``if`` on the
flag judged a rejection, a use, or unknown."""

from __future__ import annotations

import ast

from sglang_nvfp4_patches.llama4_router_weight.rejection_reader.frame import (
    UNREADABLE,
    Frame,
    ReaderBase,
    source_of,
)

TOP_K_ABOVE_1 = "only with top-k > 1"


def _tests_top_k(test: ast.expr) -> bool:
    """Whether ``test`` compares a ``top_k`` (``flag and cfg.top_k > 1``): the rejection is
    then of the flag with top-k > 1, not of the flag."""
    for node in ast.walk(test):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                name = side.attr if isinstance(side, ast.Attribute) else getattr(side, "id", "")
                if name == "top_k":
                    return True
    return False


class Statements(ReaderBase):
    """A body read as the CUTLASS runner runs it: asserts and branches on the flag judged."""

    def walk(self, body: list[ast.stmt], frame: Frame) -> bool:
        """Read ``body`` as the CUTLASS runner runs it; whether it can fall through."""
        for index, statement in enumerate(body):
            if not self.statement(statement, body[index + 1 :], frame):
                return False
        return True

    def statement(self, node: ast.stmt, rest: list[ast.stmt], frame: Frame) -> bool:
        if isinstance(node, (ast.Return, ast.Raise)):
            self.visit(node, frame)
            return False
        if isinstance(node, ast.Assert):
            self.assertion(node, frame)
            return True
        if isinstance(node, ast.If):
            return self.branch(node, rest, frame)
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and self._is_derived(node, frame):
            value = node.value
            if value is not None:  # its flag reads are judged where the name is read
                self.visit_except(value, list(self.flag_reads(value, frame)), frame)
            return True
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            return True
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt):
                self.statement(child, [], frame)
            else:
                self.visit(child, frame)
        return True

    def _is_derived(self, node: ast.Assign | ast.AnnAssign, frame: Frame) -> bool:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return (
            len(targets) == 1
            and isinstance(targets[0], ast.Name)
            and frame.derived.get(targets[0].id) is node.value
        )

    def assertion(self, node: ast.Assert, frame: Frame) -> None:
        reads = list(self.flag_reads(node.test, frame))
        if not reads:
            self.visit(node, frame)
            return
        lifted, flagged = self.truth(node.test, frame, False), self.truth(node.test, frame, True)
        if lifted is True and flagged is not True:
            self.rejection(reads, frame, node, "assert")
        elif lifted is True:
            self.unknown(frame, node, "an assert on the flag that passes whatever it reads")
        else:
            self.unknown(frame, node, "an assert on the flag that the flag read as False fails")
        self.visit_except(node, reads, frame)

    def branch(self, node: ast.If, rest: list[ast.stmt], frame: Frame) -> bool:
        reads = list(self.flag_reads(node.test, frame))
        if not reads:
            self.visit(node.test, frame)
            decided = self.truth(node.test, frame, None)
            live = [b for b, v in ((node.body, True), (node.orelse, False)) if decided in (None, v)]
            return any([self.walk(b, frame) for b in live])
        self.visit_except(node.test, reads, frame)
        lifted, flagged = self.truth(node.test, frame, False), self.truth(node.test, frame, True)
        if lifted is None or lifted == flagged:
            self.unknown(frame, node, "a test of the flag this reader cannot decide")
            return any([self.walk(node.body, frame), self.walk(node.orelse, frame)])
        taken, other = (node.body, node.orelse) if lifted else (node.orelse, node.body)
        if self.raises(other + rest, frame):
            when = f" {TOP_K_ABOVE_1}" if flagged is None and _tests_top_k(node.test) else ""
            self.rejection(reads, frame, node, f"raise {self.raised(other + rest)}{when}")
        else:
            self.use(reads, frame, "decides what runs")
            self.walk(other, frame)
        return self.walk(taken, frame)

    def raises(self, body: list[ast.stmt], frame: Frame) -> bool:
        """Whether ``body`` always ends in a raise on the CUTLASS runner with the flag set."""
        for index, statement in enumerate(body):
            if isinstance(statement, ast.Raise):
                return True
            if isinstance(statement, (ast.Return, ast.Break, ast.Continue)):
                return False
            if isinstance(statement, ast.If):
                decided = self.truth(statement.test, frame, True)
                rest = body[index + 1 :]
                live = [
                    b
                    for b, v in ((statement.body, True), (statement.orelse, False))
                    if decided in (None, v)
                ]
                return all(self.raises(b + rest, frame) for b in live)
            if isinstance(statement, ast.Expr) and self._helper_raises(statement.value, frame):
                return True
        return False

    def _helper_raises(self, node: ast.expr, frame: Frame) -> bool:
        target = self.resolve(node, frame) if isinstance(node, ast.Call) else None
        if target is None or target[0] is None:
            return False
        try:
            tree, _, _ = source_of(target[0])
        except UNREADABLE:
            return False
        return self.raises(tree.body, self.frame(target[0], tree, frame.hidden))

    @staticmethod
    def raised(body: list[ast.stmt]) -> str:
        for node in ast.walk(ast.Module(body=body, type_ignores=[])):
            if isinstance(node, ast.Raise) and node.exc is not None:
                exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
                return ast.unparse(exc)
        return "(a helper)"
