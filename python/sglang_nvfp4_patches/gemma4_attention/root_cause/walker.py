"""The walk: an abstract interpretation of the backend, from the sinks' callers down.

Split along what it reads: :mod:`.walk_state` (what it holds), :mod:`.walk_statements`,
:mod:`.walk_expressions` and :mod:`.walk_calls`; :class:`Walker` joins them and starts the
walk at each root.
"""

from __future__ import annotations

import ast

from sglang_nvfp4_patches.gemma4_attention.root_cause.call_graph import roots
from sglang_nvfp4_patches.gemma4_attention.root_cause.values import (
    Function,
    Kind,
    Origin,
    Value,
    dotted_name,
)
from sglang_nvfp4_patches.gemma4_attention.root_cause.walk_calls import Calls
from sglang_nvfp4_patches.gemma4_attention.root_cause.walk_expressions import Expressions
from sglang_nvfp4_patches.gemma4_attention.root_cause.walk_state import (
    Env,
    Invocation,
    targets,
)
from sglang_nvfp4_patches.gemma4_attention.root_cause.walk_statements import Statements


class Walker(Statements, Expressions, Calls):
    def __init__(self, tree: ast.Module) -> None:
        self.functions: dict[str, list[Function]] = {}
        self.static: set[Function] = set()
        self.class_names: dict[str, dict[str, ast.expr]] = {}
        self.sinks: dict[ast.Call, set[Origin]] = {}
        self.memo: dict[tuple[int, tuple[Value, ...]], Value] = {}
        self.stack: list[Function] = []
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                attrs = self.class_names.setdefault(node.name, {})
                for item in node.body:
                    if isinstance(item, ast.Assign | ast.AnnAssign) and item.value is not None:
                        for target in targets(item):
                            if isinstance(target, ast.Name):
                                attrs[target.id] = item.value
                    elif isinstance(item, Function):
                        self._add_function(item)
            elif isinstance(node, Function):
                self._add_function(node)
        self.module = Env()  # names read while the module body runs: none yet
        self.module = self.block(tree.body, Env(), Invocation()) or Env()

    def _add_function(self, node: Function) -> None:
        self.functions.setdefault(node.name, []).append(node)
        if any(dotted_name(d) == "staticmethod" for d in node.decorator_list):
            self.static.add(node)

    # roots -----------------------------------------------------------------------------------

    def walk_roots(self, lines: list[str]) -> None:
        """Every function :func:`call_graph.roots` names, each run with its parameters unknown
        (their in-module callers pass real values)."""
        for name in roots(self.functions, lines):
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
