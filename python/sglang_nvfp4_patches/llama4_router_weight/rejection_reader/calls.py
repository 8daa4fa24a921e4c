"""Calls: which of SGLang's functions a call runs (a method on self, ``super()``, a module
function), followed with its parameters bound; and the findings."""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import sys
from typing import Any

from sglang_nvfp4_patches.llama4_router_weight.rejection_reader.frame import (
    FLAG_NAME,
    HARMLESS_BUILTINS,
    MAX_FUNCTIONS,
    UNREADABLE,
    Frame,
    Kind,
    ReaderBase,
    collect_locals,
    is_super,
    source_of,
    unwrapped,
)


class Calls(ReaderBase):
    """Which function a call runs, and following it with its parameters bound."""

    def resolve(self, node: ast.Call, frame: Frame) -> tuple[Any, list[ast.expr]] | None:
        """The function a call runs, if it is SGLang's and can be read, with the arguments
        it is bound before the call's own (``self`` for a method); ``(None, ["harmless"])``
        for a builtin that reads nothing; ``None`` when it cannot be known."""
        func = node.func
        if isinstance(func, ast.Attribute):
            receiver = func.value
            if self.kind(receiver, frame) is Kind.SELF:
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
        parameters = [a.arg for a in (*tree.args.posonlyargs, *tree.args.args)]
        named = {*parameters, *(a.arg for a in tree.args.kwonlyargs)}
        pairs = list(zip(parameters, args, strict=False))
        pairs += [(name, value) for name, value in keywords.items() if name in named]
        unpaired = [*args[len(parameters) :], *(v for k, v in keywords.items() if k not in named)]
        if any(self._handed(value, caller) for value in unpaired):
            self.unknown(caller, at, "arguments this reader cannot pair")
        for name, value in pairs:
            kind = self.kind(value, caller)
            if kind is not None:
                frame.bound[name] = kind
                continue
            reads = list(self.flag_reads(value, caller))
            if not reads:
                continue
            carried = self.portable(value, caller)
            if carried is None:
                self.use([value], caller, f"hands a value computed from it to {name}")
                continue
            frame.bound[FLAG_NAME] = self.kind(reads[0], caller) or Kind.FLAG
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
        real = [r for r in reads if self.kind(r, frame) is Kind.REAL_FLAG]
        if real:
            through = ast.unparse(real[0])
            self.unknown(frame, node, f"rejects it through {through}, which the lift does not hide")
            return
        self.found.rejections.append(f"{how} at {frame.where(node)}")

    def use(self, reads: list[ast.expr], frame: Frame, how: str) -> None:
        self.found.uses.append(f"{how} at {frame.where(reads[0])}")

    def unknown(self, frame: Frame, node: ast.AST, why: str) -> None:
        self.found.unknown.append(f"{why} at {frame.where(node)}")
