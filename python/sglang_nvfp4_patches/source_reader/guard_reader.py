"""A guard reading of live functions: what a method does with a flag it reads, on one runner
(pure: ``ast`` and ``inspect`` on the objects it is given; it imports nothing of SGLang but
what SGLang's own code imports where it runs).

:class:`GuardReader` walks a function's body (found by :func:`.sources.source_of`) as the
chosen runner runs it: tests that name a runner backend are decided for it
(``backend.is_flashinfer_cutlass()``, ``self.use_flashinfer_trtllm``), and code after a branch
that returns is not reached. It follows what the function calls in the followed package:
helpers on ``self`` (base classes included, properties too), ``super()``, and module
functions, with their parameters bound to what the call passes (:func:`.binding.pair`).
Locals assigned once stand for their value (aliases and derived values: ``cfg =
self.moe_runner_config``, ``ok = not cfg.flag``). Truth is three-valued (``True``, ``False``,
``None``: cannot say), with the flag read as set, as unset, or unknown.

Each read of the flag is judged:

* a **rejection**: an ``assert`` that fails, or an ``if`` whose flag branch always raises, when
  the flag is set, and passes when read as unset through ``self.<holder>`` (what a view
  hides);
* a **use**: the flag decides something else, or is handed on to a callee;
* **unknown**: anything the reader cannot follow (a read through another object, a call it
  cannot read that is handed ``self`` or the holder, the flag's name as a string).

The question (:class:`.frame.Subject`) names the holder, the flag and the runner. One class, one
file: the walk of any node, statement or expression, stays here.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import sys
from collections.abc import Iterator
from typing import Any

from sglang_nvfp4_patches.source_reader.binding import pair
from sglang_nvfp4_patches.source_reader.frame import (
    FLAG_NAME,
    HARMLESS_BUILTINS,
    MAX_FUNCTIONS,
    Findings,
    Frame,
    Role,
    Subject,
    collect_locals,
)
from sglang_nvfp4_patches.source_reader.sources import (
    UNREADABLE,
    module_root,
    source_of,
    unwrapped,
)
from sglang_nvfp4_patches.source_reader.syntax import attribute_read, getattr_read, is_super


class GuardReader:
    """Reads functions for one :class:`.frame.Subject`; ``found`` holds what it saw."""

    def __init__(self, owner: type, subject: Subject, package: str) -> None:
        self.owner = owner  # the class read (``object`` for a function on its own)
        self.subject = subject
        self.package = package  # whose code is followed (SGLang's)
        self.found = Findings()
        self.seen: set[tuple[int, tuple[tuple[str, Role], ...]]] = set()

    def own(self, function: Any) -> bool:
        return module_root(function) == self.package

    def read(self, name: str, hidden: bool) -> str | None:
        """Walk ``self.owner.name``; why it cannot be read, or ``None``."""
        function = inspect.getattr_static(self.owner, name, None)
        function = getattr(function, "__func__", function)
        if function is None:
            return f"{self.owner.__name__}.{name} not found"
        where = f"{self.owner.__name__}.{name}"
        return self.read_function(function, 0, Role.SELF, hidden, where)

    def read_function(
        self, function: Any, position: int, role: Role, hidden: bool, name: str | None = None
    ) -> str | None:
        """Walk ``function`` with its ``position``-th parameter standing for ``role``; why it
        cannot be read, or ``None``."""
        name = name or getattr(function, "__qualname__", repr(function))
        try:
            tree, filename, first = source_of(function)
        except UNREADABLE as error:
            return f"cannot read {name} ({type(error).__name__}: {error})"
        parameters = [*tree.args.posonlyargs, *tree.args.args]
        if len(parameters) <= position:
            return f"{name} takes no parameter {position + 1}"
        frame = self.frame(function, tree, hidden, filename, first)
        frame.bound[parameters[position].arg] = role
        self.walk(tree.body, frame)
        return None

    # what a node stands for, and its truth ------------------------------------------------

    def role(self, node: ast.expr, frame: Frame) -> Role | None:
        """What ``node`` stands for: self, the config, the flag (or none of them)."""
        if isinstance(node, ast.Name):
            if node.id in frame.bound:
                return frame.bound[node.id]
            if node.id in frame.derived:
                return self.role(frame.derived[node.id], frame)
            return None
        attribute = attribute_read(node)
        if attribute is None:
            return None
        base, name = attribute
        base_role = self.role(base, frame)
        if name == self.subject.holder and base_role is Role.SELF:
            return Role.CONFIG if frame.hidden else Role.REAL_CONFIG
        if name == self.subject.flag:
            return Role.FLAG if base_role is Role.CONFIG else Role.REAL_FLAG
        return None

    def flag_reads(self, node: ast.AST, frame: Frame) -> Iterator[ast.expr]:
        """The reads of the flag in ``node``'s tree (a local standing for one counts)."""
        if isinstance(node, ast.expr) and self.role(node, frame) in (Role.FLAG, Role.REAL_FLAG):
            yield node
            return
        if isinstance(node, ast.Name) and node.id in frame.derived:
            yield from self.flag_reads(frame.derived[node.id], frame)
            return
        for child in ast.iter_child_nodes(node):
            yield from self.flag_reads(child, frame)

    def truth(self, node: ast.expr, frame: Frame, flag: bool | None) -> bool | None:
        """``node``'s truth on the chosen runner with the flag read as ``flag`` (``None``:
        cannot say)."""
        role = self.role(node, frame)
        if role in (Role.FLAG, Role.REAL_FLAG):
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
        """Tests that name a runner backend, decided for the chosen runner."""
        if isinstance(node, ast.Call) and not node.args and not node.keywords:
            name = node.func.attr if isinstance(node.func, ast.Attribute) else None
            if name and name.startswith("is_") and name[3:] in self.subject.backends:
                return name[3:] == self.subject.runner
            return None
        name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", None)
        for backend in self.subject.backends:
            if name in (f"enable_{backend}_moe", f"enable_{backend}", f"use_{backend}"):
                return backend == self.subject.runner
        return None

    # statements ---------------------------------------------------------------------------

    def walk(self, body: list[ast.stmt], frame: Frame) -> bool:
        """Read ``body`` as the chosen runner runs it; whether it can fall through."""
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
            condition = flagged is None and _compares(node.test, self.subject.condition)
            when = f" {self.subject.condition_note}" if condition else ""
            self.rejection(reads, frame, node, f"raise {self.raised(other + rest)}{when}")
        else:
            self.use(reads, frame, "decides what runs")
            self.walk(other, frame)
        return self.walk(taken, frame)

    def raises(self, body: list[ast.stmt], frame: Frame) -> bool:
        """Whether ``body`` always ends in a raise on the chosen runner with the flag set."""
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

    # expressions --------------------------------------------------------------------------

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
        role = self.role(node, frame) if isinstance(node, ast.expr) else None
        if role in (Role.FLAG, Role.REAL_FLAG):
            self.use([node], frame, "reads it")  # type: ignore[list-item]
            return
        if isinstance(node, ast.Name) and node.id in frame.derived:
            reads = list(self.flag_reads(node, frame))
            if reads:
                self.use(reads, frame, f"reads it through {node.id}")
            return
        if isinstance(node, ast.Constant) and node.value == self.subject.flag:
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
        if node.attr == self.subject.flag and not isinstance(node.ctx, ast.Load):
            self.unknown(frame, node, "writes the flag")
            return
        if isinstance(node.ctx, ast.Load) and self.role(node.value, frame) is Role.SELF:
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
            self.role(node.func.value, frame) is Role.SELF or is_super(node.func.value)
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
        role = self.role(node, frame)
        if role is not None:
            return not objects_only or role in (Role.SELF, Role.CONFIG, Role.REAL_CONFIG)
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return any(self._handed(element, frame, objects_only) for element in node.elts)
        if isinstance(node, ast.Dict):
            values = [v for v in node.values if v is not None]
            return any(self._handed(v, frame, objects_only) for v in values)
        return not objects_only and bool(list(self.flag_reads(node, frame)))

    # calls --------------------------------------------------------------------------------

    def resolve(self, node: ast.Call, frame: Frame) -> tuple[Any, list[ast.expr]] | None:
        """The function a call runs, if it is SGLang's and can be read, with the arguments
        it is bound before the call's own (``self`` for a method); ``(None, ["harmless"])``
        for a builtin that reads nothing; ``None`` when it cannot be known."""
        func = node.func
        if isinstance(func, ast.Attribute):
            receiver = func.value
            if self.role(receiver, frame) is Role.SELF:
                found = inspect.getattr_static(self.owner, func.attr, None)
                return self._method(found, receiver)
            if is_super(receiver):
                return self._super(func.attr, frame)
            return None
        if isinstance(func, ast.Name):
            value = self._global(func.id, frame)
            if value is builtins.__dict__.get(func.id) and func.id in HARMLESS_BUILTINS:
                return None, ["harmless"]
            if inspect.isfunction(value) and self.own(value):
                return value, []
        return None

    def _method(self, found: Any, receiver: ast.expr) -> tuple[Any, list[ast.expr]] | None:
        if isinstance(found, staticmethod):
            found = found.__func__
            return (found, []) if self.own(found) else None
        if isinstance(found, classmethod):
            found = found.__func__
            bound: list[ast.expr] = [ast.Constant(value=None)]
            return (found, bound) if self.own(found) else None
        if inspect.isfunction(found):
            return (found, [receiver]) if self.own(found) else (None, ["harmless"])
        return None

    def _super(self, name: str, frame: Frame) -> tuple[Any, list[ast.expr]] | None:
        mro = self.owner.__mro__
        start = mro.index(frame.defined_in) + 1 if frame.defined_in in mro else 1
        for cls in mro[start:]:
            if name in vars(cls):
                self_name = ast.Name(id=frame.node.args.args[0].arg, ctx=ast.Load())
                return self._method(vars(cls)[name], self_name)
        return None

    def _global(self, name: str, frame: Frame) -> Any:
        if name in frame.imported:
            module, attribute = frame.imported[name]
            if module not in sys.modules and module.split(".")[0] == self.package:
                try:  # SGLang imports it the same way when the method runs
                    importlib.import_module(module)
                except Exception:
                    return None
            return getattr(sys.modules.get(module), attribute, None)
        if name in frame.globals:
            return frame.globals[name]
        return builtins.__dict__.get(name)

    def frame(
        self,
        function: Any,
        tree: ast.FunctionDef | ast.AsyncFunctionDef,
        hidden: bool,
        filename: str = "?",
        first: int = 1,
    ) -> Frame:
        function = inspect.unwrap(function)
        defined_in = next(
            (
                cls
                for cls in self.owner.__mro__
                if any(unwrapped(value) is function for value in vars(cls).values())
            ),
            None,
        )
        frame = Frame(
            tree, filename, first, getattr(function, "__globals__", {}), defined_in, hidden
        )
        collect_locals(frame)
        return frame

    def follow(
        self,
        function: Any,
        args: list[ast.expr],
        keywords: dict[str | None, ast.expr],
        caller: Frame,
        at: ast.AST,
    ) -> None:
        try:
            tree, filename, first = source_of(function)
        except UNREADABLE as error:
            self.unknown(
                caller,
                at,
                f"cannot read {getattr(function, '__qualname__', function)}"
                f" ({type(error).__name__})",
            )
            return
        frame = self.frame(function, tree, caller.hidden, filename, first)
        given, unpaired, _ = pair(tree.args, args, keywords)
        if any(self._handed(value, caller) for value in unpaired):
            self.unknown(caller, at, "arguments this reader cannot pair")
        for name, value in given.items():
            role = self.role(value, caller)
            if role is not None:
                frame.bound[name] = role
                continue
            reads = list(self.flag_reads(value, caller))
            if not reads:
                continue
            carried = self.portable(value, caller)
            if carried is None:
                self.use([value], caller, f"hands a value computed from it to {name}")
                continue
            frame.bound[FLAG_NAME] = self.role(reads[0], caller) or Role.FLAG
            frame.derived[name] = carried
        key = (id(inspect.unwrap(function)), tuple(sorted(frame.bound.items())))
        if key in self.seen:
            return
        self.seen.add(key)
        self.found.followed += 1
        if self.found.followed > MAX_FUNCTIONS:
            self.unknown(caller, at, f"more than {MAX_FUNCTIONS} functions to follow")
            return
        self.walk(tree.body, frame)

    def rejection(self, reads: list[ast.expr], frame: Frame, node: ast.AST, how: str) -> None:
        real = [r for r in reads if self.role(r, frame) is Role.REAL_FLAG]
        if real:
            through = ast.unparse(real[0])
            self.unknown(frame, node, f"rejects it through {through}, which the lift does not hide")
            return
        self.found.rejections.append(f"{how} at {frame.where(node)}")

    def use(self, reads: list[ast.expr], frame: Frame, how: str) -> None:
        self.found.uses.append(f"{how} at {frame.where(reads[0])}")

    def unknown(self, frame: Frame, node: ast.AST, why: str) -> None:
        self.found.unknown.append(f"{why} at {frame.where(node)}")


def _compares(test: ast.expr, name: str) -> bool:
    """Whether ``test`` compares a ``name`` (``flag and cfg.top_k > 1``): a rejection is then
    of the flag with that condition, not of the flag."""
    for node in ast.walk(test):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                found = side.attr if isinstance(side, ast.Attribute) else getattr(side, "id", "")
                if name and found == name:
                    return True
    return False
