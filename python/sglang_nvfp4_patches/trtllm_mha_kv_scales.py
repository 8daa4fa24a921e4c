"""Does SGLang's TRT-LLM MHA backend hand the FP8 KV-cache V scale to the kernel? (pure)

The root cause behind the ``gemma4-attention`` rule (sglang#26518): with an FP8 KV cache,
``trtllm_mha_backend.py`` called FlashInfer's TRT-LLM attention with ``bmm2_scale = 1.0``,
so the V scale of the FP8 cache never reached the second BMM and every output was off by it.
sglang#28144 (in 0.5.14) computes ``bmm2_scale`` from the layer's V scale instead.

The answer is read off the backend's source with :mod:`ast`, never by importing it (that
would load FlashInfer at plugin load) and never from a version string (nightlies between
May and June 2026 say 0.5.14 and still carry the old code). "Applied" needs positive
evidence: an abstract interpretation follows the ``bmm2_scale`` of every ``trtllm_batch_*``
call, on the FP8 KV-cache path only, back through locals, tuples, same-module helpers (called
with their actual arguments, closures included) and module or class names, to the layer's V
scale (``layer.v_scale``, ``getattr(layer, "v_scale_float")``; arithmetic on it allowed).
Branches a test on the KV-cache dtype keeps off FP8 are not walked; a private helper the
module calls is walked only from its callers, with their arguments.
A constant that reaches the kernel is the bug (a constant used only where a test on the V
scale says it is missing is a fallback, not a drop); anything the walk cannot follow is
"unknown", which counts as live.
"""

from __future__ import annotations

import ast
import enum
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

SCALE_NAME = "bmm2_scale"
SINK_PREFIX = "trtllm_batch_"  # FlashInfer's TRT-LLM attention entry points
_MAX_DEPTH = 12  # helper calls followed into; deeper is "cannot follow"
# FlashInfer's bmm2_scale is the 8th parameter (decode) or 9th (context): fewer positional
# arguments and no keyword leave it at its default, 1.0.
_FIRST_SCALE_POSITION = 7
_WORD = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")
_CALLED = re.compile(r"(?<!def )(?<![\w])([A-Za-z_]\w*)\s*\(")
_REFERENCED = re.compile(r"(?<![\w])([A-Za-z_]\w*)\b(?!\s*\()")
_V_SCALE_NAME = re.compile(r"_?(k?v|value)_?scales?(_float)?", re.IGNORECASE)
_PRESERVING_CALLS = frozenset(
    {"float", "int", "abs", "min", "max", "round", "tensor", "as_tensor", "scalar_tensor"}
)
_CONSTANT_METHODS = frozenset({"new_ones", "new_full", "new_zeros", "fill_", "zero_"})
_FP8_TOKENS = frozenset({"fp8", "float8"})
_OTHER_KV_TOKENS = frozenset({"fp4", "nvfp4", "bf16", "bfloat16", "fp16", "float16"})
_KV_TOKENS = frozenset({"kv", "kvcache", "cache", "native"})
_FLAG_FILLER = frozenset({"is", "use", "uses", "has"})
_OTHER_DTYPE = re.compile(
    r"(torch\.)?(bfloat16|float16|half|float32|float|bf16|fp16|fp32|uint8|int8|.*fp4.*|float4.*)"
)


class KvScaleHandoff(enum.Enum):
    APPLIED = "applied"  # every FP8-path bmm2_scale comes from the V scale: the bug is fixed
    DROPPED = "dropped"  # a constant reaches some FP8-path bmm2_scale: the bug is live
    UNKNOWN = "unknown"  # some FP8-path bmm2_scale cannot be followed (counted as live)


@dataclass(frozen=True)
class KvScaleVerdict:
    handoff: KvScaleHandoff
    evidence: str  # one line an operator can check against the file

    @property
    def bug_live(self) -> bool:
        """Unknown counts as live: accuracy over speed when the code cannot be read."""
        return self.handoff is not KvScaleHandoff.APPLIED


class Kind(enum.Enum):
    V_SCALE = "the layer's V scale"
    CONSTANT = "a constant"
    FALLBACK = "a constant used where the V scale is missing"
    OPAQUE = "something this probe cannot follow"
    PARAMETER = "a parameter"


@dataclass(frozen=True)
class Origin:
    """Where (part of) a value comes from; ``node`` is the source of the evidence line."""

    kind: Kind
    node: ast.AST
    literal: object = None  # a constant's value (getattr names are string constants)
    note: str = ""
    function: str = ""  # PARAMETER: whose parameter


Origins = frozenset[Origin]


@dataclass(frozen=True)
class Tup:
    items: tuple[Value, ...]


Value = Origins | Tup
BOTTOM: Origins = frozenset()


def _flatten(value: Value) -> Origins:
    if isinstance(value, Tup):
        return frozenset().union(*(_flatten(item) for item in value.items))
    return value


def _join(*values: Value) -> Value:
    present = [v for v in values if not (isinstance(v, frozenset) and not v)]
    if not present:
        return BOTTOM
    if all(isinstance(v, Tup) for v in present):
        lengths = {len(v.items) for v in present if isinstance(v, Tup)}
        if len(lengths) == 1:
            columns = zip(*(v.items for v in present if isinstance(v, Tup)), strict=True)
            return Tup(tuple(_join(*column) for column in columns))
    return frozenset().union(*(_flatten(v) for v in present))


def _has(value: Value, kind: Kind) -> bool:
    return any(origin.kind is kind for origin in _flatten(value))


def _as_fallback(value: Value, opaque_too: bool = False) -> Value:
    """Constants (and, where a test says the V scale is missing, anything else but the V
    scale) used instead of a V scale are fallbacks, not drops."""
    if isinstance(value, Tup):
        return Tup(tuple(_as_fallback(item, opaque_too) for item in value.items))
    kinds = (Kind.CONSTANT, Kind.OPAQUE, Kind.PARAMETER) if opaque_too else (Kind.CONSTANT,)
    return frozenset(
        Origin(Kind.FALLBACK, o.node, o.literal, o.note) if o.kind in kinds else o for o in value
    )


def _combine(values: Iterable[Value], node: ast.AST) -> Origins:
    """Arithmetic: the V scale survives it; else what cannot be followed; else constants."""
    origins = frozenset().union(*(_flatten(v) for v in values))
    v_scale = frozenset(o for o in origins if o.kind is Kind.V_SCALE)
    if v_scale:
        return v_scale
    followed = frozenset(o for o in origins if o.kind not in (Kind.CONSTANT, Kind.FALLBACK))
    return followed or origins or frozenset({Origin(Kind.OPAQUE, node)})


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def _callee(node: ast.Call) -> str | None:
    if isinstance(node.func, ast.Name):
        return node.func.id
    if isinstance(node.func, ast.Attribute):
        return node.func.attr
    return None


# --- which branches lie on the FP8 KV-cache path -------------------------------------------

FP8, OTHER = "fp8", "other"
Side = str | None  # what a test being true (or false) says about the KV-cache dtype


def _flag_kind(name: str) -> Side:
    """``is_fp8_kv``-like names say FP8; ``is_nvfp4_kvcache``/``uses_native_fp4``-like names
    say another KV dtype. ``use_fused_fp8_path`` says nothing about the cache."""
    tokens = set(name.lower().strip("_").split("_"))
    plain = tokens - _FLAG_FILLER
    for kind, marks in ((FP8, _FP8_TOKENS), (OTHER, _OTHER_KV_TOKENS)):
        if tokens & marks and (tokens & _KV_TOKENS or plain <= marks):
            return kind
    return None


def _dtype_kind(node: ast.AST) -> Side:
    text = node.value if isinstance(node, ast.Constant) else _dotted(node)
    if not isinstance(text, str):
        return None
    if re.search("float8|fp8", text, re.IGNORECASE):
        return FP8
    return OTHER if _OTHER_DTYPE.fullmatch(text.lower()) else None


def _is_kv_dtype(node: ast.AST) -> bool:
    """``self.data_type`` (SGLang's name for the KV-cache dtype in attention backends),
    ``kv_cache_dtype``, ``self.kv_cache.dtype``...; never the query's or the output's."""
    text = _dotted(node) or ""
    last = text.rsplit(".", 1)[-1]
    if not re.search("d(ata_?)?type", last) or re.match("(q|query|o|out|output|model)_", last):
        return False
    return last == "data_type" or bool(re.search("kv|cache", text))


def _negate(sides: tuple[Side, Side]) -> tuple[Side, Side]:
    return sides[1], sides[0]


def _compare_sides(test: ast.Compare) -> tuple[Side, Side]:
    if len(test.ops) != 1:
        return None, None
    left, op, right = test.left, test.ops[0], test.comparators[0]
    if not _is_kv_dtype(left):
        left, right = right, left
    if not _is_kv_dtype(left):
        return None, None
    if isinstance(op, ast.In | ast.NotIn) and isinstance(right, ast.Tuple | ast.List | ast.Set):
        kinds = [_dtype_kind(element) for element in right.elts]
        if FP8 in kinds:
            sides: tuple[Side, Side] = (FP8 if set(kinds) == {FP8} else None, OTHER)
        else:
            sides = (OTHER if kinds and set(kinds) == {OTHER} else None, None)
        return _negate(sides) if isinstance(op, ast.NotIn) else sides
    kind = _dtype_kind(right)
    if isinstance(op, ast.Eq | ast.Is | ast.NotEq | ast.IsNot) and kind is not None:
        sides = (FP8, OTHER) if kind == FP8 else (OTHER, None)
        return _negate(sides) if isinstance(op, ast.NotEq | ast.IsNot) else sides
    return None, None


def fp8_sides(test: ast.expr, flags: dict[str, tuple[Side, Side]]) -> tuple[Side, Side]:
    """(what the test being true says, what it being false says) about the KV-cache dtype."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _negate(fp8_sides(test.operand, flags))
    if isinstance(test, ast.Compare):
        return _compare_sides(test)
    if isinstance(test, ast.BoolOp):
        parts = [fp8_sides(value, flags) for value in test.values]
        one = 0 if isinstance(test.op, ast.And) else 1  # the side any operand decides
        decided = next((p[one] for p in parts if p[one] is not None), None)
        shared = {p[1 - one] for p in parts}
        agreed = shared.pop() if len(shared) == 1 else None
        return (decided, agreed) if one == 0 else (agreed, decided)
    name = test.func if isinstance(test, ast.Call) else test
    dotted = _dotted(name)
    if dotted is None:
        return None, None
    if dotted in flags:
        return flags[dotted]
    kind = _flag_kind(dotted.rsplit(".", 1)[-1])
    return (kind, OTHER if kind == FP8 else None) if kind else (None, None)


def _absent_side(test: ast.expr) -> str:
    """Which branch of a test on the V scale runs when the scale is missing."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return {"body": "orelse", "orelse": "body"}.get(_absent_side(test.operand), "both")
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        none = any(
            isinstance(n, ast.Constant) and n.value is None for n in (test.left, *test.comparators)
        )
        if none and isinstance(test.ops[0], ast.Is | ast.Eq):
            return "body"
        if none and isinstance(test.ops[0], ast.IsNot | ast.NotEq):
            return "orelse"
        return "both"
    return "orelse" if isinstance(test, ast.Name | ast.Attribute) else "both"


# --- the walk -------------------------------------------------------------------------------


@dataclass
class Env:
    """One function invocation's state on the FP8 path; ``parent`` holds closed-over names."""

    names: dict[str, Value] = field(default_factory=dict)
    flags: dict[str, tuple[Side, Side]] = field(default_factory=dict)
    closures: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = field(default_factory=dict)
    parent: Env | None = None

    def copy(self) -> Env:
        return Env(dict(self.names), dict(self.flags), dict(self.closures), self.parent)

    def lookup(self, name: str) -> Value | None:
        env: Env | None = self
        while env is not None:
            if name in env.names:
                return env.names[name]
            env = env.parent
        return None

    def closure(self, name: str) -> tuple[ast.FunctionDef | ast.AsyncFunctionDef, Env] | None:
        env: Env | None = self
        while env is not None:
            if name in env.closures:
                return env.closures[name], env
            env = env.parent
        return None


def _join_env(first: Env | None, second: Env | None) -> Env | None:
    if first is None or second is None:
        return first or second
    joined = first.copy()
    for name, value in second.names.items():
        joined.names[name] = _join(first.names.get(name, BOTTOM), value)
    for name in set(first.flags) ^ set(second.flags):
        joined.flags.pop(name, None)
    joined.closures.update(second.closures)
    return joined


Function = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass
class _Arguments:
    """What one call passes; ``unpaired`` when ``*args``/``**kwargs`` (or an unseen caller)
    hide what the parameters get."""

    node: ast.AST
    positional: list[Value]
    keywords: dict[str, Value]
    unpaired: bool


@dataclass
class _Invocation:
    """What one run of a function body collects besides its state."""

    returns: list[tuple[Value, str]] = field(default_factory=list)  # (value, guard())
    maybe_absent: int = 0  # inside branches of a test on the V scale (either side)
    absent: int = 0  # inside branches taken when the V scale is missing
    loop_exits: list[Env] = field(default_factory=list)  # states at break/continue

    def guard(self) -> str:
        return "absent" if self.absent else "maybe" if self.maybe_absent else ""


class _Walker:
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
                        for target in _targets(item):
                            if isinstance(target, ast.Name):
                                attrs[target.id] = item.value
                    elif isinstance(item, Function):
                        self._add_function(item)
            elif isinstance(node, Function):
                self._add_function(node)
        self.module = Env()  # names read while the module body runs: none yet
        self.module = self.block(tree.body, Env(), _Invocation()) or Env()

    def _add_function(self, node: Function) -> None:
        self.functions.setdefault(node.name, []).append(node)
        if any(_dotted(d) == "staticmethod" for d in node.decorator_list):
            self.static.add(node)

    # statements ------------------------------------------------------------------------------

    def block(self, body: list[ast.stmt], env: Env | None, run: _Invocation) -> Env | None:
        for statement in body:
            if env is None:
                return None
            env = self.statement(statement, env, run)
        return env

    def statement(self, node: ast.stmt, env: Env, run: _Invocation) -> Env | None:
        if isinstance(node, ast.Return):
            value = self.expr(node.value, env) if node.value else frozenset()
            run.returns.append((value, run.guard()))
            return None
        if isinstance(node, ast.Raise):
            return None
        if isinstance(node, ast.Assert):
            return None if fp8_sides(node.test, env.flags)[0] == OTHER else env
        if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            return self.assign(node, env)
        if isinstance(node, ast.If):
            return self.branch(node, env, run)
        if isinstance(node, ast.For | ast.AsyncFor | ast.While):
            return self.loop(node, env, run)
        if isinstance(node, ast.Break | ast.Continue):
            run.loop_exits.append(env)
            return None
        if isinstance(node, ast.Try | ast.TryStar):
            after_body = self.block(node.body, env.copy(), run)
            raised = _join_env(env, after_body)
            ends = [self.block(h.body, raised.copy(), run) for h in node.handlers if raised]
            ends.append(self.block(node.orelse, after_body, run))
            end: Env | None = None
            for one in ends:
                end = _join_env(end, one)
            return self.block(node.finalbody, end, run) if node.finalbody else end
        if isinstance(node, ast.With | ast.AsyncWith):
            for item in node.items:
                self.expr(item.context_expr, env)
                if item.optional_vars is not None:
                    self.bind(item.optional_vars, frozenset({Origin(Kind.OPAQUE, item)}), env)
            return self.block(node.body, env, run)
        if isinstance(node, ast.Match):
            self.expr(node.subject, env)
            end = env
            for case in node.cases:
                end = _join_env(end, self.block(case.body, env.copy(), run))
            return end
        if isinstance(node, Function):
            env.closures[node.name] = node
            env.names.pop(node.name, None)
            return env
        if isinstance(node, ast.Expr):
            self.expr(node.value, env)
        return env

    def assign(self, node: ast.Assign | ast.AnnAssign | ast.AugAssign, env: Env) -> Env:
        if node.value is None:
            return env
        value = self.expr(node.value, env)
        if isinstance(node, ast.AugAssign):
            value = _combine([self.expr(node.target, env), value], node)
        for target in _targets(node):
            self.bind(target, value, env)
            if isinstance(target, ast.Name):
                sides = fp8_sides(node.value, env.flags)
                if sides != (None, None) and not isinstance(node, ast.AugAssign):
                    env.flags[target.id] = sides
                else:
                    env.flags.pop(target.id, None)
        return env

    def bind(self, target: ast.expr, value: Value, env: Env) -> None:
        if isinstance(target, ast.Name):
            env.names[target.id] = value
            env.closures.pop(target.id, None)
        elif isinstance(target, ast.Tuple | ast.List):
            starred = any(isinstance(e, ast.Starred) for e in target.elts)
            paired = isinstance(value, Tup) and len(value.items) == len(target.elts)
            for index, element in enumerate(target.elts):
                if isinstance(value, Tup) and paired and not starred:
                    self.bind(element, value.items[index], env)
                elif isinstance(value, Tup) or starred:
                    self.bind(element, frozenset({Origin(Kind.OPAQUE, target)}), env)
                else:
                    self.bind(element, value, env)
        elif isinstance(target, ast.Starred):
            self.bind(target.value, frozenset({Origin(Kind.OPAQUE, target)}), env)

    def branch(self, node: ast.If, env: Env, run: _Invocation) -> Env | None:
        when_true, when_false = fp8_sides(node.test, env.flags)
        guard = _has(self.test_value(node.test, env), Kind.V_SCALE)
        absent = _absent_side(node.test) if guard else ""
        ends: dict[str, Env | None] = {}
        for side, body, off in (
            ("body", node.body, when_true == OTHER),
            ("orelse", node.orelse, when_false == OTHER),
        ):
            if off:
                ends[side] = None
                continue
            maybe, definite = absent == "both", absent == side
            run.maybe_absent += maybe
            run.absent += definite
            ends[side] = self.block(body, env.copy(), run)
            run.maybe_absent -= maybe
            run.absent -= definite
        body_end, orelse_end = ends["body"], ends["orelse"]
        if guard and body_end is not None and orelse_end is not None:
            for side, mine, other in (
                ("body", body_end, orelse_end),
                ("orelse", orelse_end, body_end),
            ):
                if absent not in (side, "both"):
                    continue
                for name, value in mine.names.items():
                    theirs = other.names.get(name, BOTTOM)
                    if value != theirs and _has(theirs, Kind.V_SCALE):
                        mine.names[name] = _as_fallback(value, absent == side)
        return _join_env(body_end, orelse_end)

    def loop(self, node: ast.For | ast.AsyncFor | ast.While, env: Env, run: _Invocation) -> Env:
        if isinstance(node, ast.For | ast.AsyncFor):
            self.expr(node.iter, env)
        else:
            self.test_value(node.test, env)
        outer_exits, run.loop_exits = run.loop_exits, []
        state = env
        for _ in range(2):  # twice: values set late in the body reach its start once
            entry = state.copy()
            if isinstance(node, ast.For | ast.AsyncFor):
                self.bind(node.target, frozenset({Origin(Kind.OPAQUE, node.target)}), entry)
            state = _join_env(state, self.block(node.body, entry, run)) or state
        for exit_env in run.loop_exits:
            state = _join_env(state, exit_env) or state
        run.loop_exits = outer_exits
        return self.block(node.orelse, state, run) or env

    # expressions -----------------------------------------------------------------------------

    def test_value(self, test: ast.expr, env: Env) -> Origins:
        """What a test reads (names and attributes), without following calls."""
        found: set[Origin] = set()
        for node in ast.walk(test):
            if isinstance(node, ast.Name | ast.Attribute):
                found |= _flatten(self.reference(node, env))
        return frozenset(found)

    def reference(self, node: ast.Name | ast.Attribute, env: Env) -> Value:
        if isinstance(node, ast.Name):
            value = env.lookup(node.id)
            if value is None:
                value = self.module.names.get(node.id)
            return value if value is not None else frozenset({Origin(Kind.OPAQUE, node)})
        if _V_SCALE_NAME.fullmatch(node.attr):
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
        if base_value is not None and _has(base_value, Kind.V_SCALE):
            return frozenset(o for o in _flatten(base_value) if o.kind is Kind.V_SCALE)
        return frozenset({Origin(Kind.OPAQUE, node)})

    def expr(self, node: ast.expr, env: Env) -> Value:
        if isinstance(node, ast.Constant):
            return frozenset({Origin(Kind.CONSTANT, node, node.value)})
        if isinstance(node, ast.Name):
            found = env.closure(node.id)
            if found is not None and env.lookup(node.id) is None:
                self.call_closure(found, _Arguments(node, [], {}, True), env)
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
            index = node.slice
            if (
                isinstance(base, Tup)
                and isinstance(index, ast.Constant)
                and isinstance(index.value, int)
                and -len(base.items) <= index.value < len(base.items)
            ):
                return base.items[index.value]
            return _combine([base], node) if _has(base, Kind.V_SCALE) else self.opaque(node)
        if isinstance(node, ast.BinOp):
            left, right = self.expr(node.left, env), self.expr(node.right, env)
            if _annihilates(node):
                return frozenset({Origin(Kind.CONSTANT, node, 0)})
            return _combine([left, right], node)
        if isinstance(node, ast.UnaryOp):
            return _combine([self.expr(node.operand, env)], node)
        if isinstance(node, ast.BoolOp):
            values = [self.expr(value, env) for value in node.values]
            if isinstance(node.op, ast.Or):  # `v_scale or default`: default if v_scale is missing
                seen = [_has(v, Kind.V_SCALE) for v in values]
                if any(seen):
                    first = seen.index(True)
                    values[first + 1 :] = [_as_fallback(v, True) for v in values[first + 1 :]]
            return _join(*values)
        if isinstance(node, ast.Compare):
            return _join(*(self.expr(n, env) for n in (node.left, *node.comparators)))
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
        for child in ast.iter_child_nodes(node):  # comprehensions, f-strings, lambdas, ...
            if isinstance(child, ast.expr) and not isinstance(node, ast.Lambda):
                self.expr(child, env)
        return self.opaque(node)

    @staticmethod
    def opaque(node: ast.AST, note: str = "") -> Origins:
        return frozenset({Origin(Kind.OPAQUE, node, note=note)})

    def if_expr(self, node: ast.IfExp, env: Env) -> Value:
        when_true, when_false = fp8_sides(node.test, env.flags)
        body = BOTTOM if when_true == OTHER else self.expr(node.body, env)
        orelse = BOTTOM if when_false == OTHER else self.expr(node.orelse, env)
        if _has(self.test_value(node.test, env), Kind.V_SCALE):
            absent = _absent_side(node.test)
            if absent in ("body", "both") and _has(orelse, Kind.V_SCALE):
                body = _as_fallback(body, absent == "body")
            if absent in ("orelse", "both") and _has(body, Kind.V_SCALE):
                orelse = _as_fallback(orelse, absent == "orelse")
        return _join(body, orelse)

    def call(self, node: ast.Call, env: Env) -> Value:
        name = _callee(node)
        args = [self.expr(a.value if isinstance(a, ast.Starred) else a, env) for a in node.args]
        call = _Arguments(
            node,
            args,
            {k.arg: self.expr(k.value, env) for k in node.keywords if k.arg},
            any(isinstance(a, ast.Starred) for a in node.args)
            or any(k.arg is None for k in node.keywords),
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
            return _join(*(self.call_function(fn, call, method) for fn in self.functions[name]))
        if name == "getattr" and len(node.args) >= 2:
            (name_origin, *others) = _flatten(args[1]) or {Origin(Kind.OPAQUE, node)}
            text = name_origin.literal
            if not others and isinstance(text, str) and _V_SCALE_NAME.fullmatch(text):
                # the evidence is where the name is written (a helper's caller, often)
                return frozenset({Origin(Kind.V_SCALE, name_origin.node)})
            return self.opaque(node)
        if isinstance(node.func, ast.Attribute):
            receiver = self.expr(node.func.value, env)
            if _has(receiver, Kind.V_SCALE):
                if name in _CONSTANT_METHODS:
                    return frozenset({Origin(Kind.CONSTANT, node)})
                return _combine([receiver], node)
        if name in _PRESERVING_CALLS and node.args and not call.unpaired:
            return _combine(args, node)
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

    def record_sink(self, call: _Arguments) -> None:
        recorded = self.sinks.setdefault(call.node, set())
        if SCALE_NAME in call.keywords:
            recorded |= _flatten(call.keywords[SCALE_NAME])
        elif call.unpaired or len(call.positional) > _FIRST_SCALE_POSITION:
            note = f"{SCALE_NAME} by position or **kwargs"
            recorded.add(Origin(Kind.OPAQUE, call.node, note=note))
        else:
            note = f"FlashInfer's default {SCALE_NAME}"
            recorded.add(Origin(Kind.CONSTANT, call.node, 1.0, note=note))

    def bind_params(self, fn: Function, call: _Arguments, skip_first: bool) -> Env:
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

    def call_function(self, fn: Function, call: _Arguments, method: bool) -> Value:
        """A module function, run with this call's arguments (once per distinct set)."""
        env = self.bind_params(fn, call, skip_first=method and fn not in self.static)
        key = (id(fn), tuple(env.names[name] for name in sorted(env.names)))
        if key in self.memo:
            return self.memo[key]
        if fn in self.stack or len(self.stack) >= _MAX_DEPTH:
            return self.opaque(call.node, f"{fn.name}() is recursive or nested too deep")
        self.memo[key] = result = self.run(fn, env)
        return result

    def call_closure(self, found: tuple[Function, Env], call: _Arguments, env: Env) -> Value:
        """A nested function sees its enclosing names as they are when it runs (now)."""
        fn, _ = found
        if fn in self.stack or len(self.stack) >= _MAX_DEPTH:
            return self.opaque(call.node, f"{fn.name}() is recursive or nested too deep")
        local = self.bind_params(fn, call, skip_first=False)
        local.parent = env
        return self.run(fn, local)

    def run(self, fn: Function, env: Env) -> Value:
        self.stack.append(fn)
        run = _Invocation()
        try:
            self.block(fn.body, env, run)
        finally:
            self.stack.pop()
        plain = [value for value, guard in run.returns if not guard]
        if any(_has(value, Kind.V_SCALE) for value in plain):
            guarded = [_as_fallback(v, g == "absent") for v, g in run.returns if g]
            return _join(*plain, *guarded)
        return _join(*(value for value, _ in run.returns))

    # roots -----------------------------------------------------------------------------------

    def walk_roots(self, lines: list[str]) -> None:
        """Every function holding a sink, and every function calling those, transitively,
        each run with its parameters unknown (their in-module callers pass real values).
        Who calls whom is read off the text (cheap; a name in a comment only adds a root)."""
        names = set(self.functions)
        words: dict[str, set[str]] = {}
        for name, defs in self.functions.items():
            for fn in defs:
                text = "\n".join(lines[fn.lineno - 1 : fn.end_lineno])
                words.setdefault(name, set()).update(_WORD.findall(text))
        roots = {
            name
            for name, found in words.items()
            if any(w.startswith(SINK_PREFIX) and w not in names for w in found)
        }
        changed = True
        while changed:
            changed = False
            for name, found in words.items():
                if name not in roots and found & roots:
                    roots.add(name)
                    changed = True
        text = "\n".join(lines)
        called = set(_CALLED.findall(text)) & names
        passed = set(_REFERENCED.findall(text)) & names  # a helper handed on (partial, ...)
        # A private helper that this module calls (and never hands on) runs only in the
        # contexts of its callers: with their arguments, and not at all from code off the FP8
        # path. Anything else may be called from outside, with parameters that are unknown.
        private = {n for n in names if n.startswith("_") and not n.endswith("__")}
        for name in sorted(roots - (private & called - passed)):
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


def _targets(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        return list(node.targets)
    if isinstance(node, ast.AnnAssign | ast.AugAssign):
        return [node.target]
    return []


# --- the verdict ----------------------------------------------------------------------------


def _line(origin: Origin) -> int:
    return getattr(origin.node, "lineno", 0)


@dataclass(frozen=True)
class _Reader:
    """Turns origins into the one line an operator checks against the file."""

    lines: list[str]
    walker: _Walker

    def where(self, origin: Origin) -> str:
        line = _line(origin)
        text = self.lines[line - 1].strip() if 0 < line <= len(self.lines) else "?"
        text = text if len(text) <= 90 else text[:87] + "..."
        owner = ""
        for defs in self.walker.functions.values():
            for fn in defs:
                if fn.lineno <= line <= (fn.end_lineno or fn.lineno):
                    owner = f" in {fn.name}()"
        note = f" ({origin.note})" if origin.note and origin.kind is not Kind.PARAMETER else ""
        if origin.kind is Kind.PARAMETER:
            note = f" (parameter {origin.note} of {origin.function}(), set by its callers)"
        return f"`{text}`{note} l.{line}{owner}"


def _first(origins: Iterable[Origin], *kinds: Kind) -> Origin:
    return min((o for o in origins if o.kind in kinds), key=_line)


def analyse_backend_source(source: str, filename: str = "trtllm_mha_backend.py") -> KvScaleVerdict:
    """Verdict for the source text of SGLang's ``trtllm_mha_backend.py``."""
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as error:
        return KvScaleVerdict(KvScaleHandoff.UNKNOWN, f"{filename} does not parse: {error}")
    lines = source.splitlines()
    walker = _Walker(tree)
    walker.walk_roots(lines)
    read = _Reader(lines, walker)
    found: dict[KvScaleHandoff, list[str]] = {handoff: [] for handoff in KvScaleHandoff}
    for sink in sorted(walker.sinks, key=lambda call: call.lineno):
        origins = walker.sinks[sink]
        if not origins:
            continue  # reached only off the FP8 KV-cache path
        kinds = {origin.kind for origin in origins}
        call = f"{SCALE_NAME} of {_callee(sink)}() l.{sink.lineno}"
        if Kind.CONSTANT in kinds or kinds == {Kind.FALLBACK}:
            constant = _first(origins, Kind.CONSTANT if Kind.CONSTANT in kinds else Kind.FALLBACK)
            found[KvScaleHandoff.DROPPED].append(f"{call} is a constant: {read.where(constant)}")
        elif kinds & {Kind.OPAQUE, Kind.PARAMETER} or Kind.V_SCALE not in kinds:
            stuck = _first(origins, Kind.OPAQUE, Kind.PARAMETER)
            found[KvScaleHandoff.UNKNOWN].append(f"cannot follow {call} past {read.where(stuck)}")
        else:
            found[KvScaleHandoff.APPLIED].append(read.where(_first(origins, Kind.V_SCALE)))
    path = f"{filename}, FP8 KV-cache path"
    dropped, unknown = found[KvScaleHandoff.DROPPED], found[KvScaleHandoff.UNKNOWN]
    applied = found[KvScaleHandoff.APPLIED]
    if dropped:
        return KvScaleVerdict(
            KvScaleHandoff.DROPPED,
            f"{path}: {dropped[0]}, so the V scale is dropped{_more(dropped)}",
        )
    if unknown:
        return KvScaleVerdict(KvScaleHandoff.UNKNOWN, f"{path}: {unknown[0]}{_more(unknown)}")
    if applied:
        return KvScaleVerdict(
            KvScaleHandoff.APPLIED,
            f"{path}: {SCALE_NAME} of all {len(applied)} {SINK_PREFIX}* calls comes from the "
            f"layer's V scale ({applied[0]})",
        )
    return KvScaleVerdict(KvScaleHandoff.UNKNOWN, f"{path}: no {SINK_PREFIX}* call found")


def _more(found: list[str]) -> str:
    return f" (and {len(found) - 1} more calls)" if len(found) > 1 else ""
