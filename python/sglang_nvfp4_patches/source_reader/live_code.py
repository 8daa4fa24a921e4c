"""Functions read from live objects (pure: ``ast`` and ``inspect`` on what it is given; it imports
nothing of SGLang but what SGLang's own code imports where it runs): one class's methods (bases,
properties, ``super()``), module functions from globals and local imports, and where each lies
(:class:`LiveContext`). Only the followed package's code is read."""

from __future__ import annotations

import ast
import builtins
import functools
import importlib
import inspect
import sys
import textwrap
from dataclasses import dataclass, field
from typing import Any

from sglang_nvfp4_patches.source_reader.flow_state import Callee, Env
from sglang_nvfp4_patches.source_reader.syntax import Function, is_super
from sglang_nvfp4_patches.source_reader.values import Kind, Origin, Value, has

UNREADABLE = (OSError, TypeError, SyntaxError)  # reading a function's source raises these


@functools.lru_cache(maxsize=256)
def source_of(function: Any) -> tuple[Function, str, int]:
    """A live ``function``'s tree (never changed by a reader), file and first line."""
    function = inspect.unwrap(function)
    lines, first = inspect.getsourcelines(function)
    tree = ast.parse(textwrap.dedent("".join(lines)))
    node = tree.body[0]
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        raise TypeError(f"{function!r} is not a function definition")
    return node, inspect.getsourcefile(function) or "?", first


def unwrapped(value: Any) -> Any:
    """The function behind a property, a bound or static method, or a decorator."""
    if isinstance(value, property):
        value = value.fget
    value = getattr(value, "__func__", value)
    try:
        return inspect.unwrap(value) if callable(value) else value
    except ValueError:
        return value


# Builtins that cannot read an attribute of what they are handed.
HARMLESS_BUILTINS = frozenset({"bool", "isinstance", "issubclass", "type", "id", "len", "callable"})


@dataclass(frozen=True)
class LiveContext:
    """Where a live function lies: globals, local imports, defining class, file and line."""

    node: Function
    globals: dict[str, Any] = field(hash=False, compare=False)
    imported: dict[str, tuple[str, str]] = field(hash=False, compare=False)
    defined_in: type | None
    filename: str
    first_line: int

    def where(self, node: ast.AST) -> str:
        line = self.first_line + getattr(node, "lineno", 1) - 1
        return f"{self.filename.rsplit('/', 1)[-1]}:{line}"


@dataclass(frozen=True)
class LiveCode:
    """The code of ``owner`` (``object`` for a function on its own) and of ``package``."""

    owner: type
    package: str
    module_body: tuple[ast.stmt, ...] = ()

    def own(self, function: Any) -> bool:
        module = getattr(inspect.unwrap(function), "__module__", "")
        return str(module).split(".")[0] == self.package

    def callee(self, function: Any, bound: tuple[Value, ...] = (), name: str = "") -> Callee:
        """``function``'s tree and where it lies, or why it cannot be read."""
        name = name or getattr(function, "__qualname__", repr(function))
        try:
            tree, filename, first = source_of(function)
        except UNREADABLE as error:
            return Callee(None, problem=f"cannot read {name} ({type(error).__name__}: {error})")
        function = inspect.unwrap(function)
        defined_in = next(
            (
                cls
                for cls in self.owner.__mro__
                if any(unwrapped(value) is function for value in vars(cls).values())
            ),
            None,
        )
        imported = {
            alias.asname or alias.name: (node.module, alias.name)
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module and not node.level
            for alias in node.names
        }
        context = LiveContext(
            tree, getattr(function, "__globals__", {}), imported, defined_in, filename, first
        )
        return Callee(tree, bound, context=context)

    def callees(self, node: ast.Call, env: Env, receiver: Value | None) -> list[Callee] | None:
        """What a call runs, if it is the package's (``None``: cannot be known)."""
        func = node.func
        if isinstance(func, ast.Attribute):
            if receiver is not None and has(receiver, Kind.SELF):
                found = inspect.getattr_static(self.owner, func.attr, None)
                return self._method(found, receiver)
            if is_super(func.value):
                return self._super(func.attr, env)
            return None
        if isinstance(func, ast.Name):
            value = self._global(func.id, env.context)
            if value is builtins.__dict__.get(func.id) and func.id in HARMLESS_BUILTINS:
                return [Callee(None, harmless=True)]
            if inspect.isfunction(value) and self.own(value):
                return [self.callee(value)]
        return None

    def property(self, node: ast.Attribute, base: Value) -> Callee | None:
        """``self.name`` where ``name`` is a property of the package's: its getter."""
        if not has(base, Kind.SELF):
            return None
        found = inspect.getattr_static(self.owner, node.attr, None)
        if isinstance(found, property) and found.fget is not None and self.own(found.fget):
            return self.callee(found.fget, (base,))
        return None

    def class_value(self, node: ast.Attribute) -> ast.expr | None:
        return None

    def _method(self, found: Any, receiver: Value) -> list[Callee] | None:
        if isinstance(found, staticmethod | classmethod):
            constant = frozenset({Origin(Kind.CONSTANT, ast.Constant(value=None))})
            bound = (constant,) if isinstance(found, classmethod) else ()
            found = found.__func__
            return [self.callee(found, bound)] if self.own(found) else None
        if inspect.isfunction(found):
            own = self.own(found)
            return [self.callee(found, (receiver,)) if own else Callee(None, harmless=True)]
        return None

    def _super(self, name: str, env: Env) -> list[Callee] | None:
        context = env.context
        if not isinstance(context, LiveContext) or not context.node.args.args:
            return None
        mro = self.owner.__mro__
        start = mro.index(context.defined_in) + 1 if context.defined_in in mro else 1
        for cls in mro[start:]:
            if name in vars(cls):
                receiver = env.lookup(context.node.args.args[0].arg)
                return self._method(vars(cls)[name], receiver or frozenset())
        return None

    def _global(self, name: str, context: Any) -> Any:
        if not isinstance(context, LiveContext):
            return builtins.__dict__.get(name)
        if name in context.imported:
            module, attribute = context.imported[name]
            if module not in sys.modules and module.split(".")[0] == self.package:
                try:  # SGLang imports it the same way when the method runs
                    importlib.import_module(module)
                except Exception:
                    return None
            return getattr(sys.modules.get(module), attribute, None)
        if name in context.globals:
            return context.globals[name]
        return builtins.__dict__.get(name)
