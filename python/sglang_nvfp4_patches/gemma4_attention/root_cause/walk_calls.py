"""The walk of calls: kernel calls recorded with their scale, same-module helpers and
closures run with their actual arguments."""

from __future__ import annotations

import ast

from sglang_nvfp4_patches.gemma4_attention.root_cause.heuristics import (
    CONSTANT_METHODS,
    FIRST_SCALE_POSITION,
    PRESERVING_CALLS,
    SCALE_NAME,
    SINK_PREFIX,
    V_SCALE_NAME,
)
from sglang_nvfp4_patches.gemma4_attention.root_cause.values import (
    Function,
    Kind,
    Origin,
    Value,
    as_fallback,
    callee,
    combine,
    flatten,
    has,
    join,
)
from sglang_nvfp4_patches.gemma4_attention.root_cause.walk_state import (
    MAX_DEPTH,
    Arguments,
    Env,
    Invocation,
    WalkerBase,
)


class Calls(WalkerBase):
    """Calls: the kernel's (recorded as sinks), this module's functions and closures (run with
    the call's arguments), and the few calls that keep or drop the V scale."""

    def call(self, node: ast.Call, env: Env) -> Value:
        name = callee(node)
        # From the first `*x` on, which parameter an argument meets cannot be told: those
        # arguments are walked (calls in them run) but not paired.
        starred = [isinstance(a, ast.Starred) for a in node.args]
        cut = starred.index(True) if any(starred) else len(node.args)
        args = [self.expr(a, env) for a in node.args[:cut]]
        for later in node.args[cut:]:
            self.expr(later.value if isinstance(later, ast.Starred) else later, env)
        call = Arguments(
            node,
            args,
            {k.arg: self.expr(k.value, env) for k in node.keywords if k.arg},
            cut < len(node.args) or any(k.arg is None for k in node.keywords),
        )
        if name and name.startswith(SINK_PREFIX) and name not in self.functions:
            self.record_sink(call)
            return self.opaque(node)
        if isinstance(node.func, ast.Name):
            found = env.closure(node.func.id)
            if found is not None and env.lookup(node.func.id) is None:
                return self.call_closure(found, call, env)
        if self.module_target(node) and name is not None:
            method = isinstance(node.func, ast.Attribute)
            return join(*(self.call_function(fn, call, method) for fn in self.functions[name]))
        if name == "getattr" and len(args) >= 2:
            names = flatten(args[1])
            written = next(iter(names)) if len(names) == 1 else None
            if (
                written
                and isinstance(written.literal, str)
                and V_SCALE_NAME.fullmatch(written.literal)
            ):
                # the evidence is where the name is written (a helper's caller, often)
                return frozenset({Origin(Kind.V_SCALE, written.node)})
            return self.opaque(node)
        if isinstance(node.func, ast.Attribute):
            receiver = self.expr(node.func.value, env)
            if has(receiver, Kind.V_SCALE):
                if name in CONSTANT_METHODS:
                    return frozenset({Origin(Kind.CONSTANT, node)})
                return combine([receiver], node)
        if name in PRESERVING_CALLS and args and not call.unpaired:
            return combine(args, node)
        return self.opaque(node)

    def module_target(self, node: ast.Call) -> bool:
        """Is this a call of a function defined in this module (``f()``, ``self.f()``)?"""
        func = node.func
        if isinstance(func, ast.Name):
            return func.id in self.functions
        return (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id in ("self", "cls", *self.class_names)
            and func.attr in self.functions
        )

    def record_sink(self, call: Arguments) -> None:
        recorded = self.sinks.setdefault(call.node, set())
        if SCALE_NAME in call.keywords:
            recorded |= flatten(call.keywords[SCALE_NAME])
        elif call.unpaired or len(call.positional) > FIRST_SCALE_POSITION:
            note = f"{SCALE_NAME} by position or **kwargs"
            recorded.add(Origin(Kind.OPAQUE, call.node, note=note))
        else:
            note = f"FlashInfer's default {SCALE_NAME}"
            recorded.add(Origin(Kind.CONSTANT, call.node, 1.0, note=note))

    def bind_params(self, fn: Function, call: Arguments, skip_first: bool) -> Env:
        params = [*fn.args.posonlyargs, *fn.args.args]
        first_default = len(params) - len(fn.args.defaults)
        defaults = {p.arg: d for p, d in zip(params[first_default:], fn.args.defaults, strict=True)}
        if skip_first and params:
            params = params[1:]
        for param, default in zip(fn.args.kwonlyargs, fn.args.kw_defaults, strict=True):
            if default is not None:
                defaults[param.arg] = default
        env = Env()
        unknown = self.opaque(call.node, "arguments this probe cannot pair")
        for index, param in enumerate([*params, *fn.args.kwonlyargs]):
            if index < len(params) and index < len(call.positional):
                value: Value = call.positional[index]
            elif param.arg in call.keywords:
                value = call.keywords[param.arg]
            elif call.unpaired:
                value = unknown
            elif param.arg in defaults:
                value = self.expr(defaults[param.arg], self.module)
            else:
                value = unknown
            env.names[param.arg] = value
        for extra in (fn.args.vararg, fn.args.kwarg):
            if extra is not None:
                env.names[extra.arg] = unknown
        return env

    def call_function(self, fn: Function, call: Arguments, method: bool) -> Value:
        """A module function, run with this call's arguments (once per distinct set)."""
        env = self.bind_params(fn, call, skip_first=method and fn not in self.static)
        key = (id(fn), tuple(env.names[name] for name in sorted(env.names)))
        if key in self.memo:
            return self.memo[key]
        if fn in self.stack or len(self.stack) >= MAX_DEPTH:
            return self.opaque(call.node, f"{fn.name}() is recursive or nested too deep")
        self.memo[key] = result = self.run(fn, env)
        return result

    def call_closure(self, found: tuple[Function, Env], call: Arguments, env: Env) -> Value:
        """A nested function sees its enclosing names as they are when it runs (now)."""
        fn, _ = found
        if fn in self.stack or len(self.stack) >= MAX_DEPTH:
            return self.opaque(call.node, f"{fn.name}() is recursive or nested too deep")
        local = self.bind_params(fn, call, skip_first=False)
        local.parent = env
        return self.run(fn, local)

    def run(self, fn: Function, env: Env) -> Value:
        self.stack.append(fn)
        run = Invocation()
        try:
            self.block(fn.body, env, run)
        finally:
            self.stack.pop()
        plain = [value for value, guard in run.returns if not guard]
        if any(has(value, Kind.V_SCALE) for value in plain):
            guarded = [as_fallback(v, g == "absent") for v, g in run.returns if g]
            return join(*plain, *guarded)
        return join(*(value for value, _ in run.returns))
