"""The verdict: what reaches each sink's bmm2_scale, as one line an operator can check."""

from __future__ import annotations

import ast
import enum
from collections.abc import Iterable
from dataclasses import dataclass

from sglang_nvfp4_patches.gemma4_attention.root_cause.heuristics import SCALE_NAME, SINK_PREFIX
from sglang_nvfp4_patches.gemma4_attention.root_cause.values import Kind, Origin, callee
from sglang_nvfp4_patches.gemma4_attention.root_cause.walker import Walker


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
    walker: Walker

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
    walker = Walker(tree)
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
