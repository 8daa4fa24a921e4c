"""Functions read from a module's source text, never imported (pure: ``ast`` only): its
functions and methods by name, class attributes, and which of them a call runs."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from sglang_nvfp4_patches.source_reader.flow_state import Callee, Env
from sglang_nvfp4_patches.source_reader.syntax import Function, dotted_name, targets
from sglang_nvfp4_patches.source_reader.values import Value


@dataclass
class ModuleCode:
    """One module's text, indexed; what the walker follows in it."""

    tree: ast.Module
    functions: dict[str, list[Function]] = field(default_factory=dict)
    static: set[Function] = field(default_factory=set)
    class_names: dict[str, dict[str, ast.expr]] = field(default_factory=dict)

    @classmethod
    def of(cls, tree: ast.Module) -> ModuleCode:
        index = cls(tree)
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                attrs = index.class_names.setdefault(node.name, {})
                for item in node.body:
                    if isinstance(item, ast.Assign | ast.AnnAssign) and item.value is not None:
                        for target in targets(item):
                            if isinstance(target, ast.Name):
                                attrs[target.id] = item.value
                    elif isinstance(item, Function):
                        index.add(item)
            elif isinstance(node, Function):
                index.add(node)
        return index

    def add(self, node: Function) -> None:
        self.functions.setdefault(node.name, []).append(node)
        if any(dotted_name(d) == "staticmethod" for d in node.decorator_list):
            self.static.add(node)

    @property
    def module_body(self) -> list[ast.stmt]:
        return self.tree.body

    def callees(self, node: ast.Call, env: Env, receiver: Value | None) -> list[Callee] | None:
        """The module's functions a call runs (``f()``, ``self.f()``), or ``None``."""
        func = node.func
        if isinstance(func, ast.Name):
            found = func.id in self.functions
        else:
            found = (
                isinstance(func, ast.Attribute)
                and isinstance(func.value, ast.Name)
                and func.value.id in ("self", "cls", *self.class_names)
                and func.attr in self.functions
            )
        if not found:
            return None
        name = func.id if isinstance(func, ast.Name) else func.attr  # type: ignore[attr-defined]
        method = isinstance(func, ast.Attribute)
        return [Callee(fn, (), method and fn not in self.static) for fn in self.functions[name]]

    def class_value(self, node: ast.Attribute) -> ast.expr | None:
        """A class attribute as written: ``self.X`` (any class's), ``cls.X``, ``Cls.X``."""
        base = node.value
        if not isinstance(base, ast.Name):
            return None
        owners = (
            list(self.class_names.values())
            if base.id in ("self", "cls")
            else [self.class_names.get(base.id, {})]
        )
        for attrs in owners:
            if node.attr in attrs:
                return attrs[node.attr]
        return None

    def property(self, node: ast.Attribute, base: Value) -> Callee | None:
        """Properties are not read from the text."""
        return None
