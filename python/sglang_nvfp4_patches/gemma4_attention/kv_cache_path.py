"""Which branches lie on the FP8 KV-cache path (pure: ``ast`` and ``re`` only): the path the
V-scale question (:mod:`.v_scale_question`) walks, read off tests on the KV-cache dtype and
on flags named for it or set from such a test."""

from __future__ import annotations

import ast
import re

from sglang_nvfp4_patches.source_reader.flow_state import OFF_PATH, Definition, Side
from sglang_nvfp4_patches.source_reader.syntax import dotted_name

# --- the names a maintainer edits when SGLang renames something -----------------------------

# Flag names, split on "_": tokens for FP8, for another KV-cache dtype, for the KV cache, and
# filler that says nothing (``is_fp8_kv``, ``is_nvfp4_kvcache``, ``uses_native_fp4``).
_FP8_TOKENS = frozenset({"fp8", "float8"})
_OTHER_KV_TOKENS = frozenset({"fp4", "nvfp4", "bf16", "bfloat16", "fp16", "float16"})
_KV_TOKENS = frozenset({"kv", "kvcache", "cache", "native"})
_FLAG_FILLER = frozenset({"is", "use", "uses", "has"})
# Dtypes (a string or a dotted name): FP8 ones, and ones that are surely another dtype.
_FP8_DTYPE = re.compile("float8|fp8", re.IGNORECASE)
_OTHER_DTYPE = re.compile(
    r"(torch\.)?(bfloat16|float16|half|float32|float|bf16|fp16|fp32|uint8|int8|.*fp4.*|float4.*)"
)
# Names of the KV-cache dtype: SGLang's ``self.data_type`` in attention backends, or a dtype
# name that says kv or cache; never the query's, the output's or the model's.
_SGLANG_KV_DTYPE = "data_type"
_DTYPE_NAME = re.compile("d(ata_?)?type")
_NOT_KV_DTYPE_NAME = re.compile("(q|query|o|out|output|model)_")
_KV_DTYPE_HINT = re.compile("kv|cache")

# --- which branches lie on the FP8 KV-cache path -------------------------------------------

FP8, OTHER = "fp8", OFF_PATH  # what a test being true (or false) says about the KV-cache dtype


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
    text = node.value if isinstance(node, ast.Constant) else dotted_name(node)
    if not isinstance(text, str):
        return None
    if _FP8_DTYPE.search(text):
        return FP8
    return OTHER if _OTHER_DTYPE.fullmatch(text.lower()) else None


def _is_kv_dtype(node: ast.AST) -> bool:
    """``self.data_type`` (SGLang's name for the KV-cache dtype in attention backends),
    ``kv_cache_dtype``, ``self.kv_cache.dtype``...; never the query's or the output's."""
    text = dotted_name(node) or ""
    last = text.rsplit(".", 1)[-1]
    if not _DTYPE_NAME.search(last) or _NOT_KV_DTYPE_NAME.match(last):
        return False
    return last == _SGLANG_KV_DTYPE or bool(_KV_DTYPE_HINT.search(text))


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


def fp8_sides(test: ast.expr, defs: dict[str, Definition]) -> tuple[Side, Side]:
    """(what the test being true says, what it being false says) about the KV-cache dtype;
    ``defs``: what names were set to (``is_fp8 = self.data_type == torch.float8_e4m3fn``)."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _negate(fp8_sides(test.operand, defs))
    if isinstance(test, ast.Compare):
        return _compare_sides(test)
    if isinstance(test, ast.BoolOp):
        parts = [fp8_sides(value, defs) for value in test.values]
        one = 0 if isinstance(test.op, ast.And) else 1  # the side any operand decides
        decided = next((p[one] for p in parts if p[one] is not None), None)
        first, *rest = (p[1 - one] for p in parts)  # the other side: only if all agree
        agreed = first if all(other == first for other in rest) else None
        return (decided, agreed) if one == 0 else (agreed, decided)
    name = test.func if isinstance(test, ast.Call) else test
    dotted = dotted_name(name)
    if dotted is None:
        return None, None
    if dotted in defs:
        written, earlier = defs[dotted]
        sides = fp8_sides(written, earlier)
        if sides != (None, None):
            return sides
    kind = _flag_kind(dotted.rsplit(".", 1)[-1])
    return (kind, OTHER if kind == FP8 else None) if kind else (None, None)
