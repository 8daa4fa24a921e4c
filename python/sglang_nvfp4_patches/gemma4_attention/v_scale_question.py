"""Does SGLang's TRT-LLM MHA backend hand the FP8 KV-cache V scale to the kernel? (pure)

Read off ``trtllm_mha_backend.py``'s source, never imported: "applied" needs every FP8-path
``bmm2_scale`` followed back to the V scale (sglang#28144); a constant reaching the kernel is
the bug (sglang#26518); what the walk cannot follow is "unknown", counted as live
(docs/gemma4-attention.md, "The probe").
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from sglang_nvfp4_patches.gemma4_attention.kv_cache_path import fp8_sides
from sglang_nvfp4_patches.gemma4_attention.rule import KvScaleHandoff, KvScaleVerdict
from sglang_nvfp4_patches.source_reader.call_graph import roots
from sglang_nvfp4_patches.source_reader.flow_state import Arguments, Env, FlowQuestion, Side
from sglang_nvfp4_patches.source_reader.module_code import ModuleCode
from sglang_nvfp4_patches.source_reader.syntax import callee
from sglang_nvfp4_patches.source_reader.values import Kind, Origin, Value, flatten
from sglang_nvfp4_patches.source_reader.walker import Walker

# --- the names a maintainer edits when SGLang or FlashInfer renames something ---------------

# The argument followed back to its source, and the prefix of FlashInfer's TRT-LLM attention
# entry points that take it (the sinks).
SCALE_NAME = "bmm2_scale"
SINK_PREFIX = "trtllm_batch_"
# FlashInfer's bmm2_scale is the 8th parameter (decode) or 9th (context): fewer positional
# arguments and no keyword leave it at its default, 1.0.
FIRST_SCALE_POSITION = 7
# The layer's V scale, as an attribute or a getattr name (v_scale, v_scale_float, kv_scales...).
V_SCALE_NAME = re.compile(r"_?(k?v|value)_?scales?(_float)?", re.IGNORECASE)
# Calls whose result is still the V scale they are handed.
PRESERVING_CALLS = frozenset(
    {"float", "int", "abs", "min", "max", "round", "tensor", "as_tensor", "scalar_tensor"}
)
# Tensor methods that make a constant of the V scale they are called on.
CONSTANT_METHODS = frozenset({"new_ones", "new_full", "new_zeros", "fill_", "zero_"})


class _VScaleQuestion(FlowQuestion):
    """Follow each ``trtllm_batch_*`` call's ``bmm2_scale`` back to the V scale, on the FP8
    KV-cache path."""

    preserving_calls = PRESERVING_CALLS
    constant_methods = CONSTANT_METHODS

    def __init__(self, code: ModuleCode) -> None:
        self.code = code

    def read(self, name: str, at: ast.AST, base: Callable[[], Value]) -> Value | None:
        return frozenset({Origin(Kind.SOURCE, at)}) if V_SCALE_NAME.fullmatch(name) else None

    def sides(
        self, node: ast.If | ast.IfExp | ast.Assert, env: Env, rest: list[ast.stmt]
    ) -> tuple[Side, Side]:
        return fp8_sides(node.test, env.defs)

    def sink(self, call: Arguments) -> set[Origin] | None:
        """What a ``trtllm_batch_*`` call (not one of the module's own) hands its
        ``bmm2_scale``."""
        name = callee(call.node)  # type: ignore[arg-type]
        if not name or not name.startswith(SINK_PREFIX) or name in self.code.functions:
            return None
        if SCALE_NAME in call.keywords:
            return set(flatten(call.keywords[SCALE_NAME]))
        if call.unpaired or len(call.positional) > FIRST_SCALE_POSITION:
            note = f"{SCALE_NAME} by position or **kwargs"
            return {Origin(Kind.OPAQUE, call.node, note=note)}
        note = f"FlashInfer's default {SCALE_NAME}"
        return {Origin(Kind.CONSTANT, call.node, 1.0, note=note)}


def _walk(code: ModuleCode, lines: list[str]) -> Walker:
    """Every function :func:`.call_graph.roots` names, run with its parameters unknown."""
    walker = Walker(code, _VScaleQuestion(code))
    functions = code.functions
    for name in roots(functions, lines, SINK_PREFIX):
        for fn in functions[name]:
            env = Env()
            params = [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]
            params += [p for p in (fn.args.vararg, fn.args.kwarg) if p is not None]
            for param in params:
                env.names[param.arg] = frozenset(
                    {Origin(Kind.PARAMETER, param, function=fn.name, note=param.arg)}
                )
            if params and params[0].arg in ("self", "cls"):
                env.names[params[0].arg] = walker.opaque(params[0])
            walker.run(fn, env)
    return walker


def _line(origin: Origin) -> int:
    return getattr(origin.node, "lineno", 0)


@dataclass(frozen=True)
class _Reader:
    """Turns origins into the one line an operator checks against the file."""

    lines: list[str]
    code: ModuleCode

    def where(self, origin: Origin) -> str:
        line = _line(origin)
        text = self.lines[line - 1].strip() if 0 < line <= len(self.lines) else "?"
        text = text if len(text) <= 90 else text[:87] + "..."
        owner = ""
        for defs in self.code.functions.values():
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
    code = ModuleCode.of(tree)
    walker = _walk(code, lines)
    read = _Reader(lines, code)
    found: dict[KvScaleHandoff, list[str]] = {handoff: [] for handoff in KvScaleHandoff}
    for sink in sorted(walker.sinks, key=lambda call: call.lineno):
        origins = walker.sinks[sink]
        if not origins:
            continue  # reached only off the FP8 KV-cache path
        kinds = {origin.kind for origin in origins}
        call = f"{SCALE_NAME} of {callee(sink)}() l.{sink.lineno}"
        if Kind.CONSTANT in kinds or kinds == {Kind.FALLBACK}:
            constant = _first(origins, Kind.CONSTANT if Kind.CONSTANT in kinds else Kind.FALLBACK)
            found[KvScaleHandoff.DROPPED].append(f"{call} is a constant: {read.where(constant)}")
        elif kinds & {Kind.OPAQUE, Kind.PARAMETER} or Kind.SOURCE not in kinds:
            stuck = _first(origins, Kind.OPAQUE, Kind.PARAMETER)
            found[KvScaleHandoff.UNKNOWN].append(f"cannot follow {call} past {read.where(stuck)}")
        else:
            found[KvScaleHandoff.APPLIED].append(read.where(_first(origins, Kind.SOURCE)))
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
