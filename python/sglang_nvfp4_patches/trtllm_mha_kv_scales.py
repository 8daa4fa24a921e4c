"""Does SGLang's TRT-LLM MHA backend hand the FP8 KV-cache scales to the kernel? (pure)

The root cause behind the ``gemma4-attention`` rule (sglang#26518): with an FP8 KV cache,
``trtllm_mha_backend.py`` called FlashInfer's TRT-LLM attention with ``bmm2_scale = 1.0``,
so the V scale of the FP8 cache never reached the second BMM and every output was off by it.
sglang#28144 (in 0.5.14) computes ``bmm2_scale`` from the layer's V scale instead.

The answer is read off the backend's source with :mod:`ast`, never by importing it (that
would load FlashInfer at plugin load) and never from a version string (nightlies between
May and June 2026 say 0.5.14 and still carry the old code). The verdict is per function: a
function that only ever sets ``bmm2_scale`` to a number drops the V scale.
"""

from __future__ import annotations

import ast
import enum
from dataclasses import dataclass

SCALE_NAME = "bmm2_scale"


class KvScaleHandoff(enum.Enum):
    APPLIED = "applied"  # every bmm2_scale is computed (from the V scale): the bug is fixed
    DROPPED = "dropped"  # some path passes a constant bmm2_scale: the bug is live
    UNKNOWN = "unknown"  # no backend source, unparsable, or no bmm2_scale at all


@dataclass(frozen=True)
class KvScaleVerdict:
    handoff: KvScaleHandoff
    evidence: str  # one line an operator can check against the file

    @property
    def bug_live(self) -> bool:
        """Unknown counts as live: accuracy over speed when the code cannot be read."""
        return self.handoff is not KvScaleHandoff.APPLIED


def _targets(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        return list(node.targets)
    if isinstance(node, ast.AnnAssign | ast.AugAssign):
        return [node.target]
    return []


def _assigned_values(node: ast.AST) -> list[ast.expr]:
    """Values assigned to ``bmm2_scale`` by one statement (tuple targets paired up)."""
    value = getattr(node, "value", None)
    if value is None:
        return []
    found: list[ast.expr] = []
    for target in _targets(node):
        if isinstance(target, ast.Name) and target.id == SCALE_NAME:
            found.append(value)
        elif isinstance(target, ast.Tuple):
            for index, element in enumerate(target.elts):
                if isinstance(element, ast.Name) and element.id == SCALE_NAME:
                    paired = isinstance(value, ast.Tuple) and len(value.elts) == len(target.elts)
                    found.append(value.elts[index] if paired else value)
    return found


def _passes_through(node: ast.expr) -> bool:
    """``bmm2_scale=bmm2_scale`` hands a local on; the value was decided where it was set."""
    return isinstance(node, ast.Name) and node.id == SCALE_NAME


def _is_number(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, int | float)


def analyse_backend_source(source: str, filename: str = "trtllm_mha_backend.py") -> KvScaleVerdict:
    """Verdict for the source text of SGLang's ``trtllm_mha_backend.py``."""
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as error:
        return KvScaleVerdict(KvScaleHandoff.UNKNOWN, f"{filename} does not parse: {error}")
    computed = 0
    dropping: list[str] = []
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        values: list[ast.expr] = []
        for node in ast.walk(function):
            values.extend(_assigned_values(node))
            if isinstance(node, ast.keyword) and node.arg == SCALE_NAME:
                values.append(node.value)
        values = [v for v in values if not _passes_through(v)]
        constants = [v for v in values if _is_number(v)]
        computed += len(values) - len(constants)
        if constants and len(constants) == len(values):
            dropping.append(f"{function.name}() l.{constants[0].lineno}")
    if dropping:
        return KvScaleVerdict(
            KvScaleHandoff.DROPPED,
            f"{SCALE_NAME} is a constant in {filename} {', '.join(dropping)}, so the FP8 V "
            "scale is dropped",
        )
    if computed:
        return KvScaleVerdict(
            KvScaleHandoff.APPLIED,
            f"every {SCALE_NAME} in {filename} is computed from the layer's KV-cache scales",
        )
    return KvScaleVerdict(KvScaleHandoff.UNKNOWN, f"{filename} never sets {SCALE_NAME}")
