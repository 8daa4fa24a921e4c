"""Does SGLang's TRT-LLM MHA backend hand the FP8 KV-cache V scale to the kernel? (pure)

The root cause behind the ``gemma4-attention`` rule (sglang#26518): with an FP8 KV cache,
``trtllm_mha_backend.py`` called FlashInfer's TRT-LLM attention with ``bmm2_scale = 1.0``,
so the V scale of the FP8 cache never reached the second BMM and every output was off by it.
sglang#28144 computes ``bmm2_scale`` from the layer's V scale instead (which releases carry
it: the ``gemma4-attention`` column of docs/releases.md).

The answer is read off the backend's source with :mod:`ast`, never by importing it (that
would load FlashInfer at plugin load) and never from a version string (nightlies that already
report the fixed version still carry the old code). "Applied" needs positive evidence: the
value-flow reading of :mod:`sglang_nvfp4_patches.source_reader` follows the ``bmm2_scale`` of
every ``trtllm_batch_*`` call, on the FP8 KV-cache path only, back through locals, tuples,
same-module helpers (called with their actual arguments, closures included) and module or
class names, to the layer's V scale (``layer.v_scale``, ``getattr(layer, "v_scale_float")``;
arithmetic on it allowed).
Branches a test on the KV-cache dtype keeps off FP8 are not walked; a private helper the
module calls is walked only from its callers, with their arguments.
A constant that reaches the kernel is the bug (a constant used only where a test on the V
scale says it is missing is a fallback, not a drop); anything the walk cannot follow is
"unknown", which counts as live.

This module is the question: the sinks and their scale argument, the source (the V scale),
the path (:mod:`.kv_cache_path`), and the verdict.
"""

from __future__ import annotations

import ast
import enum
import re
from collections.abc import Iterable
from dataclasses import dataclass

from sglang_nvfp4_patches.gemma4_attention.kv_cache_path import fp8_sides
from sglang_nvfp4_patches.source_reader.flow_state import Arguments, FlowQuestion
from sglang_nvfp4_patches.source_reader.syntax import callee
from sglang_nvfp4_patches.source_reader.value_flow import ValueFlow
from sglang_nvfp4_patches.source_reader.values import Kind, Origin, flatten

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


def _sink_value(call: Arguments) -> set[Origin]:
    """What a ``trtllm_batch_*`` call hands its ``bmm2_scale``."""
    if SCALE_NAME in call.keywords:
        return set(flatten(call.keywords[SCALE_NAME]))
    if call.unpaired or len(call.positional) > FIRST_SCALE_POSITION:
        note = f"{SCALE_NAME} by position or **kwargs"
        return {Origin(Kind.OPAQUE, call.node, note=note)}
    note = f"FlashInfer's default {SCALE_NAME}"
    return {Origin(Kind.CONSTANT, call.node, 1.0, note=note)}


QUESTION = FlowQuestion(
    source_name=V_SCALE_NAME,
    sink_prefix=SINK_PREFIX,
    sink_value=_sink_value,
    path_sides=fp8_sides,
    preserving_calls=PRESERVING_CALLS,
    constant_methods=CONSTANT_METHODS,
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


def _line(origin: Origin) -> int:
    return getattr(origin.node, "lineno", 0)


@dataclass(frozen=True)
class _Reader:
    """Turns origins into the one line an operator checks against the file."""

    lines: list[str]
    walker: ValueFlow

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
    walker = ValueFlow(tree, QUESTION)
    walker.walk_roots(lines)
    read = _Reader(lines, walker)
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
