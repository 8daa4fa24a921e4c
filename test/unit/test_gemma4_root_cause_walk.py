"""The root-cause probe, statement by statement and expression by expression (no SGLang import).

Each case is a small backend written for it; the expected verdict says what a maintainer
reading that code would conclude about the FP8 KV-cache V scale, and the evidence line the
operator is shown must point at the line that decides it. ``test_gemma4_root_cause_reader``
holds the traps and the ways of being right; this file covers every construct the walk follows,
so that a change to how one is read shows up as a wrong verdict or a wrong line
(``scripts/mutation.sh``, ``docs/mutation.md``).
"""

from __future__ import annotations

import textwrap
from typing import Any

import pytest

from sglang_nvfp4_patches.gemma4_attention.v_scale_question import KvScaleHandoff
from support.probe_sources import SINK, forward, line_of, named, verdict_of

APPLIED, DROPPED, UNKNOWN = KvScaleHandoff.APPLIED, KvScaleHandoff.DROPPED, KvScaleHandoff.UNKNOWN

# ---------------------------------------------------------------- tests on the KV-cache dtype

DTYPE_TEST = f"""
if {{test}}:
    return {SINK}(q, bmm2_scale={{when_true}})
return {SINK}(q, bmm2_scale={{when_false}})
"""


def skipped_sides(test: str) -> tuple[bool, bool]:
    """Whether the probe takes ``test`` being true, and being false, to mean "not an FP8 KV
    cache": a unit bmm2 on that side only is then no drop."""
    unit_when_true = DTYPE_TEST.format(test=test, when_true="1.0", when_false="layer.v_scale")
    unit_when_false = DTYPE_TEST.format(test=test, when_true="layer.v_scale", when_false="1.0")
    return (
        verdict_of(forward(unit_when_true)).handoff is APPLIED,
        verdict_of(forward(unit_when_false)).handoff is APPLIED,
    )


@pytest.mark.parametrize(
    ("test", "true_is_not_fp8", "false_is_not_fp8"),
    [
        ("self.data_type == torch.bfloat16", True, False),
        ("torch.bfloat16 == self.data_type", True, False),
        ("self.data_type != torch.float8_e4m3fn", True, False),
        ("self.data_type == torch.float8_e4m3fn", False, True),
        ("self.data_type is not torch.bfloat16", False, True),
        ('self.kv_cache_dtype == "fp8_e4m3"', False, True),
        ('self.kv_cache_dtype == "auto"', False, False),
        ("self.data_type in (torch.bfloat16, torch.float16)", True, False),
        ("self.data_type in [torch.float8_e4m3fn, torch.float8_e5m2]", False, True),
        ("self.data_type in {torch.float8_e4m3fn, torch.bfloat16}", False, True),
        ("self.data_type not in (torch.float8_e4m3fn,)", True, False),
        ("self.data_type not in (torch.bfloat16, torch.half)", False, True),
        # what the probe cannot see into decides nothing
        ("self.data_type in (torch.bfloat16, self.model_dtype)", False, False),
        ("self.data_type in FP8_DTYPES", False, False),
        ("self.data_type == (torch.float8_e4m3fn,)", False, False),
        ("self.data_type == self.model_dtype", False, False),
        ("self.data_type < torch.float8_e4m3fn", False, False),
        ("torch.bfloat16 == self.data_type == torch.half", False, False),
        # whose dtype: the KV cache's, never the query's, the output's or the model's
        ("self.q_data_type == torch.bfloat16", False, False),
        ("self.model_dtype == torch.bfloat16", False, False),
        ("self.out_cache_dtype == torch.bfloat16", False, False),
        ("self.kv_cache.dtype == torch.bfloat16", True, False),
        ("self.kv_dtype == torch.bfloat16", True, False),
        ("self.layer.data_type == torch.bfloat16", True, False),
        # flags, by name
        ("self.is_fp8_kv", False, True),
        ("self.is_fp8_kv()", False, True),
        ("not self.is_fp8_kv", True, False),
        ("self.is_nvfp4_kvcache", True, False),
        ("self.uses_native_fp4", True, False),
        ("self._fp8", False, True),
        ("self.flags.fp8", False, True),
        ("self.is_float8_fp8", False, True),
        ("self.kv_cache_ready", False, False),
        ("self.cfg().is_fp8_kv", False, False),
        # and / or / not
        ("self.data_type == torch.bfloat16 or self.is_nvfp4_kvcache", True, False),
        ("self.data_type == torch.bfloat16 and self.use_cuda_graph", True, False),
        ("self.is_fp8_kv and self.use_cuda_graph", False, False),
        ("self.is_fp8_kv and self.data_type == torch.float8_e4m3fn", False, True),
        ("self.is_nvfp4_kvcache or self.use_cuda_graph", False, False),
        ("self.is_fp8_kv or self.data_type == torch.float8_e5m2", False, True),
        ("not (self.is_fp8_kv or self.data_type == torch.float8_e5m2)", True, False),
        # an FP8 test and a test for another dtype at once: nothing can be concluded
        ("self.data_type in (torch.float8_e4m3fn,) and self.is_nvfp4_kvcache", False, False),
        (
            "self.data_type in (torch.float8_e4m3fn, torch.bfloat16) and self.is_nvfp4_kvcache",
            True,
            False,
        ),
    ],
)
def test_which_side_of_a_test_is_off_the_fp8_path(
    test: str, true_is_not_fp8: bool, false_is_not_fp8: bool
) -> None:
    assert skipped_sides(test) == (true_is_not_fp8, false_is_not_fp8)


NEUTRAL_FLAG = """
kvq = self.data_type == torch.float8_e4m3fn
{change}
if not kvq:
    return trtllm_batch_decode_with_kv_cache(q, bmm2_scale=1.0)
return trtllm_batch_decode_with_kv_cache(q, bmm2_scale=layer.v_scale)
"""


@pytest.mark.parametrize(
    ("change", "handoff"),
    [
        ("pass", APPLIED),  # the local keeps what the test said
        ("kvq = self.use_cuda_graph", DROPPED),  # reassigned: it says nothing any more
        ("kvq |= self.is_fp8_kv", DROPPED),  # updated in place: neither
        ("if self.use_cuda_graph:\n    kvq = self.use_cuda_graph", DROPPED),  # on one path
    ],
    ids=["kept", "reassigned", "updated", "reassigned-on-one-path"],
)
def test_a_local_holding_a_dtype_test_is_read_where_it_is_tested(
    change: str, handoff: KvScaleHandoff
) -> None:
    verdict = verdict_of(forward(NEUTRAL_FLAG.format(change=change)))
    assert verdict.handoff is handoff, verdict.evidence


ONE_PATH = """
if self.use_cuda_graph:
    {then}
else:
    {otherwise}
if not kvq:
    return trtllm_batch_decode_with_kv_cache(q, bmm2_scale=1.0)
return trtllm_batch_decode_with_kv_cache(q, bmm2_scale=layer.v_scale)
"""
FP8_TEST = "kvq = self.data_type == torch.float8_e4m3fn"


@pytest.mark.parametrize(
    ("then", "otherwise"), [(FP8_TEST, "pass"), ("pass", FP8_TEST)], ids=["if", "else"]
)
def test_a_local_set_on_one_path_only_says_nothing_after_it(then: str, otherwise: str) -> None:
    source = forward(ONE_PATH.format(then=then, otherwise=otherwise))
    assert verdict_of(source).handoff is DROPPED
    both = forward(ONE_PATH.format(then=FP8_TEST, otherwise=FP8_TEST))
    assert verdict_of(both).handoff is APPLIED


# ---------------------------------------------------------------- tests on the V scale itself

GUARDS = [
    # (test, bmm2 when true, bmm2 when false): what is used where the V scale is missing is a
    # fallback
    ("layer.v_scale is None", "self.default", "layer.v_scale", APPLIED),
    ("not layer.v_scale is None", "layer.v_scale", "self.default", APPLIED),
    ("not layer.v_scale", "self.default", "layer.v_scale", APPLIED),
    ("layer.v_scale", "layer.v_scale", "self.default", APPLIED),
    ("layer.v_scale > 0", "layer.v_scale", "1.0", APPLIED),
    ("self.has_scale(layer.v_scale)", "layer.v_scale", "1.0", APPLIED),
    ("self.has_scale(layer.v_scale)", "layer.v_scale", "self.default", UNKNOWN),
    ("not self.has_scale(layer.v_scale)", "1.0", "layer.v_scale", APPLIED),
    # a test that does not say the V scale is missing: what its other side holds is unknown
    ("layer.v_scale > 0", "layer.v_scale", "self.default", UNKNOWN),
    ("layer.v_scale != 0", "layer.v_scale", "self.default", UNKNOWN),
    # a unit bmm2 that is no fallback for a missing V scale
    ("self.use_graph", "layer.v_scale", "1.0", DROPPED),
    ("layer.v_scale is None", "1.0", "self.other", DROPPED),
]


@pytest.mark.parametrize(("test", "then", "otherwise", "handoff"), GUARDS)
def test_a_branch_on_the_v_scale(
    test: str, then: str, otherwise: str, handoff: KvScaleHandoff
) -> None:
    body = f"if {test}:\n    bmm2 = {then}\nelse:\n    bmm2 = {otherwise}"
    source = forward(f"{body}\nreturn {SINK}(q, bmm2_scale=bmm2)")
    verdict = verdict_of(source)
    assert verdict.handoff is handoff, verdict.evidence
    if handoff is UNKNOWN:
        assert named(source, "bmm2 = self.default", owner="forward_decode") in verdict.evidence
    if handoff is DROPPED:
        assert named(source, "bmm2 = 1.0", owner="forward_decode") in verdict.evidence


@pytest.mark.parametrize(
    ("value", "handoff"),
    [
        ("1.0 if layer.v_scale is None else layer.v_scale", APPLIED),
        ("self.default if layer.v_scale is None else layer.v_scale", APPLIED),
        ("layer.v_scale if layer.v_scale > 0 else 1.0", APPLIED),
        # a test that does not say which side lacks the V scale: a constant on either side is
        # taken for its fallback
        ("1.0 if layer.v_scale > 0 else layer.v_scale", APPLIED),
        ("1.0 if self.data_type == torch.bfloat16 else layer.v_scale", APPLIED),
        ("self.default if layer.v_scale > 0 else layer.v_scale", UNKNOWN),
        ("1.0 if layer.v_scale is None else self.other", DROPPED),
        # the unit value exactly where the V scale is there
        ("1.0 if layer.v_scale else layer.v_scale_float", DROPPED),
        ("layer.v_scale_float if layer.v_scale is None else 1.0", DROPPED),
        # or: what follows the V scale is its default
        ("layer.v_scale or self.default", APPLIED),
        ("self.cfg or layer.v_scale or 1.0", UNKNOWN),
    ],
)
def test_a_conditional_value_on_the_v_scale(value: str, handoff: KvScaleHandoff) -> None:
    source = forward(f"bmm2 = {value}\nreturn {SINK}(q, bmm2_scale=bmm2)")
    verdict = verdict_of(source)
    assert verdict.handoff is handoff, verdict.evidence
    if handoff is not APPLIED:
        assert named(source, f"bmm2 = {value}", owner="forward_decode") in verdict.evidence


HELPER = f"""
class Backend:
    def _v_scale(self, layer):
{{helper}}

    def forward_decode(self, q, layer):
        return {SINK}(q, bmm2_scale=self._v_scale(layer))
"""


@pytest.mark.parametrize(
    ("helper", "handoff"),
    [
        ("if layer.v_scale is None:\n    return self.default\nreturn layer.v_scale", APPLIED),
        ("if layer.v_scale > 0:\n    pass\nelse:\n    return 1.0\nreturn layer.v_scale", APPLIED),
        (
            "if layer.v_scale > 0:\n    pass\nelse:\n    return self.default\nreturn layer.v_scale",
            UNKNOWN,
        ),
        (
            "if layer.v_scale is None:\n"
            "    if layer.v_scale_float is not None:\n"
            "        return layer.v_scale_float\n"
            "    return self.default\n"
            "return layer.v_scale",
            APPLIED,
        ),
        (
            "if layer.v_scale > 0:\n"
            "    if layer.v_scale_float is None:\n"
            "        pass\n"
            "    return 1.0\n"
            "return layer.v_scale",
            APPLIED,
        ),
        (
            "if layer.v_scale is None:\n"
            "    if layer.v_scale_float is None:\n"
            "        pass\n"
            "    return self.default\n"
            "return layer.v_scale",
            APPLIED,
        ),
        ("if self.use_graph:\n    return layer.v_scale\nelse:\n    return self.default", UNKNOWN),
        ("with self.lock:\n    return layer.v_scale", APPLIED),
        (
            'match self.mode:\n    case "decode":\n        return layer.v_scale\n'
            "return layer.v_scale_float",
            APPLIED,
        ),
        (
            "try:\n    return layer.v_scale\nexcept KeyError:\n    return layer.v_scale_float",
            APPLIED,
        ),
        (
            "try:\n    self.read(layer)\nexcept KeyError:\n    raise\nelse:\n"
            "    return layer.v_scale",
            APPLIED,
        ),
        ("try:\n    pass\nfinally:\n    return layer.v_scale", APPLIED),
        ("for part in self.parts:\n    pass\nelse:\n    return layer.v_scale", APPLIED),
    ],
    ids=[
        "missing-opaque",
        "maybe-constant",
        "maybe-opaque",
        "nested-missing",
        "nested-maybe",
        "nested-missing-twice",
        "not-a-test-on-the-v-scale",
        "in-with",
        "in-match",
        "in-try-and-except",
        "in-try-else",
        "in-finally",
        "in-for-else",
    ],
)
def test_a_helper_returning_the_v_scale_or_its_default(
    helper: str, handoff: KvScaleHandoff
) -> None:
    source = textwrap.dedent(HELPER.format(helper=textwrap.indent(helper, " " * 8)))
    verdict = verdict_of(source)
    assert verdict.handoff is handoff, verdict.evidence
    if handoff is UNKNOWN:
        assert named(source, "return self.default", owner="_v_scale") in verdict.evidence


# ---------------------------------------------------------------- statements

STATEMENTS = [
    pytest.param(
        "if self.use_graph:\n    pass\nelse:\n    bmm2 = layer.v_scale",
        APPLIED,
        None,
        id="set-on-the-else-side-only",
    ),
    pytest.param(
        "if layer.v_scale is None:\n    unit = 1.0\n    bmm2 = unit\nelse:\n"
        "    bmm2 = layer.v_scale",
        APPLIED,
        None,
        id="a-name-set-where-the-v-scale-is-missing",
    ),
    pytest.param(
        "try:\n    bmm2 = layer.v_scale\nexcept AttributeError:\n    bmm2 = 1.0",
        DROPPED,
        "bmm2 = 1.0",
        id="except-sets-a-constant",
    ),
    pytest.param(
        "bmm2 = 1.0\ntry:\n    bmm2 = layer.v_scale\nexcept AttributeError:\n    pass",
        DROPPED,
        "bmm2 = 1.0",
        id="except-keeps-the-value-before-try",
    ),
    pytest.param(
        "try:\n    self.read(layer)\nexcept KeyError:\n    raise\nelse:\n"
        "    bmm2 = layer.v_scale\nfinally:\n    self.log()",
        APPLIED,
        None,
        id="try-else-finally",
    ),
    pytest.param(
        "try:\n    bmm2 = layer.v_scale\nfinally:\n    bmm2 = 1.0",
        DROPPED,
        "bmm2 = 1.0",
        id="finally-overrides",
    ),
    pytest.param(
        "with torch.cuda.stream(self.stream):\n    bmm2 = layer.v_scale",
        APPLIED,
        None,
        id="with",
    ),
    pytest.param(
        "with self.scales_for(layer) as bmm2:\n    pass",
        UNKNOWN,
        "with self.scales_for(layer) as bmm2:",
        id="with-as",
    ),
    pytest.param(
        'bmm2 = 1.0\nmatch self.mode:\n    case "decode":\n        bmm2 = layer.v_scale',
        DROPPED,
        "bmm2 = 1.0",
        id="match-no-case-may-match",
    ),
    pytest.param(
        'match self.mode:\n    case "decode":\n        bmm2 = layer.v_scale\n'
        "    case _:\n        bmm2 = layer.v_scale_float",
        APPLIED,
        None,
        id="match-every-case",
    ),
    pytest.param(
        "bmm2 = 1.0\nfor part in self.parts:\n    bmm2 = layer.v_scale",
        DROPPED,
        "bmm2 = 1.0",
        id="for-may-not-run",
    ),
    pytest.param(
        "for part in self.parts:\n    bmm2 = layer.v_scale", APPLIED, None, id="for-sets-it"
    ),
    pytest.param(
        "for bmm2 in self.scales:\n    pass",
        UNKNOWN,
        "for bmm2 in self.scales:",
        id="for-target",
    ),
    pytest.param(
        "for part in self.parts:\n    if part.last:\n        bmm2 = 1.0\n        break\n"
        "    bmm2 = layer.v_scale",
        DROPPED,
        "bmm2 = 1.0",
        id="break",
    ),
    pytest.param(
        "for part in self.parts:\n    if part.last:\n        bmm2 = 1.0\n        continue\n"
        "    bmm2 = layer.v_scale",
        DROPPED,
        "bmm2 = 1.0",
        id="continue",
    ),
    pytest.param(
        "for part in self.parts:\n    bmm2 = layer.v_scale\nelse:\n    bmm2 = 1.0",
        DROPPED,
        "bmm2 = 1.0",
        id="for-else",
    ),
    pytest.param(
        "for group in self.groups:\n    for part in group:\n        pass\n"
        "    if group.done:\n        break\n    bmm2 = layer.v_scale",
        APPLIED,
        None,
        id="nested-loops",
    ),
    pytest.param("while self.pending(layer):\n    bmm2 = layer.v_scale", APPLIED, None, id="while"),
    pytest.param(
        "assert layer.v_scale is not None\nbmm2 = layer.v_scale", APPLIED, None, id="assert"
    ),
    pytest.param("assert self.is_fp8_kv\nbmm2 = layer.v_scale", APPLIED, None, id="assert-a-flag"),
    pytest.param(
        "bmm2 = 1.0\nfor part in self.parts:\n    bmm2 = layer.v_scale\n    if part.last:\n"
        "        break",
        DROPPED,
        "bmm2 = 1.0",
        id="break-after-setting-it",
    ),
    pytest.param(
        "scale = layer.v_scale\nif (bmm2 := scale) is None:\n    raise ValueError(layer)",
        APPLIED,
        None,
        id="walrus-of-a-name",
    ),
    pytest.param(
        "bmm2, *rest = layer.v_scale, self.o_scale",
        UNKNOWN,
        "bmm2, *rest = layer.v_scale, self.o_scale",
        id="starred-target-of-the-same-length",
    ),
    pytest.param("bmm2 = layer.v_scale\nbmm2 *= 2.0", APPLIED, None, id="augmented-v-scale"),
    pytest.param("bmm2 = 1.0\nbmm2 *= layer.v_scale", APPLIED, None, id="augmented-by-v-scale"),
    pytest.param("bmm2 = 2.0\nbmm2 *= 0.5", DROPPED, "bmm2 = 2.0", id="augmented-constant"),
    pytest.param("bmm2 = ()\nbmm2 += ()", UNKNOWN, "bmm2 += ()", id="augmented-nothing"),
    pytest.param(
        "if (bmm2 := layer.v_scale) is None:\n    raise ValueError(layer)",
        APPLIED,
        None,
        id="walrus",
    ),
    pytest.param(
        "bmm1, *bmm2 = layer.scaling, layer.v_scale",
        UNKNOWN,
        "bmm1, *bmm2 = layer.scaling, layer.v_scale",
        id="starred-target",
    ),
    pytest.param(
        "bmm1, bmm2 = layer.v_scale, 1.0, 2.0",
        UNKNOWN,
        "bmm1, bmm2 = layer.v_scale, 1.0, 2.0",
        id="unpacking-a-tuple-of-another-length",
    ),
    pytest.param(
        "bmm1, bmm2 = self.scales",
        UNKNOWN,
        "bmm1, bmm2 = self.scales",
        id="unpacking-something-else",
    ),
    pytest.param(
        "bmm2 = (*self.extra, layer.v_scale)",
        UNKNOWN,
        "bmm2 = (*self.extra, layer.v_scale)",
        id="starred-tuple",
    ),
]


@pytest.mark.parametrize(("body", "handoff", "culprit"), STATEMENTS)
def test_a_statement_on_the_way_to_the_kernel(
    body: str, handoff: KvScaleHandoff, culprit: str | None
) -> None:
    source = forward(f"{body}\nreturn {SINK}(q, bmm2_scale=bmm2)")
    verdict = verdict_of(source)
    assert verdict.handoff is handoff, verdict.evidence
    if culprit is not None:
        assert named(source, culprit, owner="forward_decode") in verdict.evidence


@pytest.mark.parametrize(
    ("body", "handoff", "culprit"),
    [
        pytest.param(
            f"{SINK}(q, out=self.out, bmm2_scale=1.0)\nreturn self.out",
            DROPPED,
            f"{SINK}(q, out=self.out, bmm2_scale=1.0)",
            id="a-call-as-a-statement",
        ),
        pytest.param(
            f"if self.skip:\n    return\nreturn {SINK}(q, bmm2_scale=layer.v_scale)",
            APPLIED,
            None,
            id="a-bare-return",
        ),
        pytest.param(
            f"out = {SINK}(q, bmm2_scale=1.0).data\nreturn out",
            DROPPED,
            f"out = {SINK}(q, bmm2_scale=1.0).data",
            id="an-attribute-of-its-result",
        ),
        pytest.param(
            f"run = lambda: {SINK}(q, bmm2_scale=1.0)\nreturn run()",
            DROPPED,
            f"run = lambda: {SINK}(q, bmm2_scale=1.0)",
            id="a-lambda",
        ),
        pytest.param(
            f"bmm2 = layer.v_scale\nrun = lambda bmm2: {SINK}(q, bmm2_scale=bmm2)\n"
            "return run(bmm2)",
            UNKNOWN,
            f"run = lambda bmm2: {SINK}(q, bmm2_scale=bmm2)",
            id="a-lambda-parameter-shadows",
        ),
        pytest.param(
            "try:\n    bmm2 = layer.v_scale\n    out = self.fast(bmm2)\nexcept RuntimeError:\n"
            f"    out = {SINK}(q, bmm2_scale=bmm2)\nreturn out",
            APPLIED,
            None,
            id="in-an-except-after-the-value-was-set",
        ),
        pytest.param(
            f"run = lambda s={SINK}(q, bmm2_scale=1.0): s\nreturn run()",
            DROPPED,
            f"run = lambda s={SINK}(q, bmm2_scale=1.0): s",
            id="a-lambda-default",
        ),
        pytest.param(
            f"run = lambda *, s: {SINK}(q, bmm2_scale=s)\nreturn run(s=layer.v_scale)",
            UNKNOWN,
            f"run = lambda *, s: {SINK}(q, bmm2_scale=s)",
            id="a-lambda-keyword-only-parameter",
        ),
        pytest.param(
            f"scale = layer.v_scale\nrun = lambda: {SINK}(q, bmm2_scale=scale)\nreturn run()",
            APPLIED,
            None,
            id="a-lambda-reads-the-enclosing-value",
        ),
        pytest.param(
            f"run = lambda bmm2: {SINK}(\n    q, bmm2_scale=bmm2\n)\nreturn run(layer.v_scale)",
            UNKNOWN,
            f"run = lambda bmm2: {SINK}(",
            id="a-lambda-parameter-on-another-line",
        ),
        pytest.param(
            f"scale = layer.v_scale\nreturn [{SINK}(part, bmm2_scale=scale) for part in q]",
            APPLIED,
            None,
            id="a-comprehension-reads-the-enclosing-value",
        ),
        pytest.param(
            f"bmm2 = layer.v_scale\nreturn [\n    {SINK}(q, bmm2_scale=bmm2)\n"
            "    for bmm2 in self.units\n]",
            UNKNOWN,
            "for bmm2 in self.units",
            id="a-comprehension-target-on-another-line",
        ),
        pytest.param(
            f"return [{SINK}(part, bmm2_scale=1.0) for part in q]",
            DROPPED,
            f"return [{SINK}(part, bmm2_scale=1.0) for part in q]",
            id="a-comprehension",
        ),
        pytest.param(
            f"return [part for part in {SINK}(q, bmm2_scale=1.0) if part]",
            DROPPED,
            f"return [part for part in {SINK}(q, bmm2_scale=1.0) if part]",
            id="its-iterable",
        ),
        pytest.param(
            f"bmm2 = layer.v_scale\n"
            f"return {{i: {SINK}(q, bmm2_scale=bmm2) for bmm2 in self.units}}",
            UNKNOWN,
            f"return {{i: {SINK}(q, bmm2_scale=bmm2) for bmm2 in self.units}}",
            id="a-loop-target-shadows",
        ),
    ],
)
def test_where_the_kernel_call_sits(
    body: str, handoff: KvScaleHandoff, culprit: str | None
) -> None:
    source = forward(body)
    verdict = verdict_of(source)
    assert verdict.handoff is handoff, verdict.evidence
    if culprit is not None:
        assert named(source, culprit, owner="forward_decode") in verdict.evidence


def test_an_assert_that_keeps_the_rest_off_the_fp8_path() -> None:
    source = forward(f"return {SINK}(q, bmm2_scale=layer.v_scale)") + textwrap.indent(
        textwrap.dedent(
            f"""
            def forward_extend(self, q, layer):
                assert self.data_type == torch.bfloat16, "BF16 KV cache only"
                return {SINK}(q, bmm2_scale=1.0)
            """
        ),
        "    ",
    )
    assert verdict_of(source).handoff is APPLIED
    fp8_only = source.replace("torch.bfloat16", "torch.float8_e4m3fn")
    assert verdict_of(fp8_only).handoff is DROPPED


# ---------------------------------------------------------------- values and operators

VALUES = [
    ("layer.v_scale + 0", APPLIED),
    ("layer.v_scale ** 2", APPLIED),
    ("-layer.v_scale", APPLIED),
    ("layer.v_scale ** 0", DROPPED),
    ("layer.v_scale - layer.v_scale", DROPPED),
    ("self.o_scale * 2.0", UNKNOWN),  # an unknown scaled by a constant is still unknown
    ("layer.v_scale.data", APPLIED),
    ("layer.v_scale[0]", APPLIED),
    ("layer.v_scale.to(torch.float32)", APPLIED),
    ("layer.v_scale.new_ones(1)", DROPPED),
    ("max(layer.v_scale, 1.0)", APPLIED),
    ('getattr(layer, "v_scale")', APPLIED),
    ("getattr(layer, self.scale_name)", UNKNOWN),
    ("self.quant.scale_of(layer.v_scale)", UNKNOWN),
    ("float(*self.scales)", UNKNOWN),
    ("self.pool().scale", UNKNOWN),
    ("(1.0, layer.v_scale)[-1]", APPLIED),
    ("(1.0, layer.v_scale)[1]", APPLIED),
    ("(1.0, layer.v_scale)[0]", DROPPED),
    ("(1.0, layer.v_scale)[-2]", DROPPED),
    ("(1.0, layer.v_scale)[self.use_fp8]", DROPPED),  # either item may reach the kernel
    ("(1.0, layer.v_scale)[i]", DROPPED),
    ("(1.0, layer.v_scale)[-self.i]", DROPPED),
    ("(1.0, 2.0, layer.v_scale)[-1]", APPLIED),
    ("-()", UNKNOWN),  # nothing known at all
    ("(layer.k_scale, layer.v_scale)[2]", UNKNOWN),
    ("(layer.v_scale, 1.0)[-2]", APPLIED),
    ("()[i]", UNKNOWN),
    ("self.scales[0]", UNKNOWN),
    ('{"v": layer.v_scale}', UNKNOWN),
    ("() + ()", UNKNOWN),
    ("float(())", UNKNOWN),
    ("getattr(layer, ())", UNKNOWN),
]


@pytest.mark.parametrize(("value", "handoff"), VALUES)
def test_a_value_on_the_way_to_the_kernel(value: str, handoff: KvScaleHandoff) -> None:
    source = forward(f"bmm2 = {value}\nreturn {SINK}(q, bmm2_scale=bmm2)")
    verdict = verdict_of(source)
    assert verdict.handoff is handoff, verdict.evidence
    if handoff is not APPLIED:
        assert named(source, f"bmm2 = {value}", owner="forward_decode") in verdict.evidence


@pytest.mark.parametrize(
    ("module", "value", "culprit"),
    [
        ("class Defaults:\n    UNIT = 1.0", "Defaults.UNIT", "UNIT = 1.0"),
        ("_ONE = 1.0\n_UNIT = _ONE", "_UNIT", "_ONE = 1.0"),
        ("_ONE = 1.0\nclass Defaults:\n    UNIT = _ONE", "self.UNIT", "_ONE = 1.0"),
        ("if TYPE_CHECKING:\n    import flashinfer\n_UNIT = 1.0", "_UNIT", "_UNIT = 1.0"),
    ],
    ids=["a-class-attribute", "a-module-name", "a-class-attribute-of-a-module-name", "if"],
)
def test_a_constant_from_the_module_is_named_where_it_is_written(
    module: str, value: str, culprit: str
) -> None:
    source = module + "\n" + forward(f"return {SINK}(q, bmm2_scale={value})")
    verdict = verdict_of(source)
    assert verdict.handoff is DROPPED, verdict.evidence
    assert f"is a constant: {named(source, culprit)}, so the V scale is dropped" in (
        verdict.evidence
    )


def test_an_attribute_of_a_class_the_module_does_not_define_is_unknown() -> None:
    source = "class Defaults:\n    UNIT = 1.0\n" + forward(
        f"return {SINK}(q, bmm2_scale=Config.UNIT)"
    )
    verdict = verdict_of(source)
    assert verdict.handoff is UNKNOWN, verdict.evidence


# ---------------------------------------------------------------- helpers and their arguments

CALLS = [
    pytest.param(
        "@staticmethod\ndef _pick(first, second):\n    return second",
        "self._pick(1.0, layer.v_scale)",
        APPLIED,
        id="staticmethod",
    ),
    pytest.param(
        "@classmethod\ndef _v(cls, layer):\n    return layer.v_scale\n"
        "@classmethod\ndef _scales(cls, layer):\n    return cls._v(layer)",
        "self._scales(layer)",
        APPLIED,
        id="classmethod-through-cls",
    ),
    pytest.param(
        "UNIT = 1.0\n@classmethod\ndef _unit(cls):\n    return cls.UNIT",
        "self._unit()",
        DROPPED,
        id="cls-attribute",
    ),
    pytest.param(
        "def _pick(self, first, second):\n    return second",
        "self._pick(1.0, second=layer.v_scale)",
        APPLIED,
        id="positional-and-keyword",
    ),
    pytest.param(
        "def _scale(self, layer, default=1.0):\n    return default",
        "self._scale(layer)",
        DROPPED,
        id="a-positional-default",
    ),
    pytest.param(
        "def _scale(self, layer, default=1.0):\n    return default",
        "self._scale(layer, layer.v_scale)",
        APPLIED,
        id="a-positional-default-given",
    ),
    pytest.param(
        "def _scale(self, layer, *, default=1.0, v):\n    return v if layer else default",
        "self._scale(layer, v=layer.v_scale)",
        DROPPED,
        id="a-keyword-only-default",
    ),
    pytest.param(
        "def _scale(self, layer, *, default=1.0, v):\n    return v",
        "self._scale(layer, v=layer.v_scale)",
        APPLIED,
        id="a-required-keyword-only",
    ),
    pytest.param(
        "def _scale(self, *parts):\n    return parts",
        "self._scale(layer.v_scale)",
        UNKNOWN,
        id="varargs",
    ),
    pytest.param(
        "def _scale(self, **parts):\n    return parts['v']",
        "self._scale(v=layer.v_scale)",
        UNKNOWN,
        id="kwargs",
    ),
    pytest.param(
        "def _v(self, layer):\n    return layer.v_scale\ndef _one(self, layer):\n    return 1.0",
        "self._one(layer) if self._v(layer) else self._one(layer)",
        DROPPED,
        id="two-helpers-same-arguments",
    ),
    pytest.param(
        "def _scale(self, layer):\n    return self._scale(layer)",
        "self._scale(layer)",
        UNKNOWN,
        id="recursive",
    ),
]


@pytest.mark.parametrize(("helpers", "value", "handoff"), CALLS)
def test_a_helper_called_with_its_arguments(
    helpers: str, value: str, handoff: KvScaleHandoff
) -> None:
    source = forward(f"return {SINK}(q, bmm2_scale={value})").replace(
        "class Backend:\n", "class Backend:\n" + textwrap.indent(helpers, "    ") + "\n", 1
    )
    verdict = verdict_of(source)
    assert verdict.handoff is handoff, verdict.evidence


def test_a_module_function_gets_no_self() -> None:
    source = "def _pick(first, second):\n    return second\n" + forward(
        f"return {SINK}(q, bmm2_scale=_pick(1.0, layer.v_scale))"
    )
    assert verdict_of(source).handoff is APPLIED


def test_a_keyword_no_parameter_takes_binds_no_name_in_the_helper() -> None:
    source = "scale = 1.0\n\ndef _pick(**ignored):\n    return scale\n" + forward(
        f"return {SINK}(q, bmm2_scale=_pick(scale=layer.v_scale))"
    )
    assert verdict_of(source).handoff is DROPPED


def test_arguments_it_cannot_pair_are_named() -> None:
    source = textwrap.dedent(
        f"""
        class Backend:
            def _run(self, q, bmm2_scale):
                return {SINK}(q, bmm2_scale=bmm2_scale)

            def forward_decode(self, q, layer):
                return self._run(*self.parts)
        """
    )
    verdict = verdict_of(source)
    assert verdict.handoff is UNKNOWN
    note = "arguments this probe cannot pair"
    assert named(source, "return self._run(*self.parts)", note, "forward_decode") in (
        verdict.evidence
    )


def test_a_parameter_set_from_an_fp8_test_keeps_its_path() -> None:
    """The helper's parameter stands for the caller's test of the KV-cache dtype (issue 39's
    walker binds what each argument was written as), so the non-FP8 return is off the path."""
    source = textwrap.dedent(
        f"""
        import torch

        class Backend:
            def _run(self, q, layer, quantized):
                if quantized:
                    return {SINK}(q, bmm2_scale=layer.v_scale)
                return {SINK}(q, bmm2_scale=1.0)

            def forward_decode(self, q, layer):
                return self._run(q, layer, self.data_type == torch.float8_e4m3fn)
        """
    )
    assert verdict_of(source).handoff is APPLIED, verdict_of(source).evidence
    unrelated = source.replace("self.data_type == torch.float8_e4m3fn", "self.ready")
    assert verdict_of(unrelated).handoff is DROPPED


def test_a_getattr_of_another_name_is_named_where_it_is_read() -> None:
    source = forward(f'return {SINK}(q, bmm2_scale=getattr(layer, "bmm2"))')
    verdict = verdict_of(source)
    assert verdict.handoff is UNKNOWN
    text = f'return {SINK}(q, bmm2_scale=getattr(layer, "bmm2"))'
    assert named(source, text, owner="forward_decode") in verdict.evidence, verdict.evidence


def test_recursion_is_named() -> None:
    source = textwrap.dedent(
        f"""
        class Backend:
            def _scale(self, layer):
                return self._scale(layer)

            def forward_decode(self, q, layer):
                return {SINK}(q, bmm2_scale=self._scale(layer))
        """
    )
    verdict = verdict_of(source)
    note = "_scale() is recursive or nested too deep"
    assert named(source, "return self._scale(layer)", note, "_scale") in verdict.evidence


def helper_chain(depth: int) -> str:
    """forward_decode -> _h1 -> ... -> _h{depth}, which reads the V scale."""
    calls = [f"def _h{i}(self, layer):\n    return self._h{i + 1}(layer)" for i in range(1, depth)]
    helpers = calls
    helpers.append(f"def _h{depth}(self, layer):\n    return layer.v_scale")
    body = textwrap.indent("\n".join(helpers), "    ")
    return forward(f"return {SINK}(q, bmm2_scale=self._h1(layer))").replace(
        "class Backend:\n", "class Backend:\n" + body + "\n", 1
    )


# ---------------------------------------------------------------- nested functions

CLOSURES = [
    pytest.param(
        f"def one(part, scale):\n    return {SINK}(part, bmm2_scale=scale)\n"
        "return one(q, layer.v_scale)",
        APPLIED,
        id="called-with-arguments",
    ),
    pytest.param(
        f"def run():\n    return {SINK}(q, bmm2_scale=1.0)\nreturn self.graph.capture(run)",
        DROPPED,
        id="handed-on",
    ),
    pytest.param(
        f"def run(scale=layer.v_scale):\n    return {SINK}(q, bmm2_scale=scale)\n"
        "return self.graph.capture(run)",
        UNKNOWN,
        id="handed-on-with-a-default",
    ),
    pytest.param(
        f"def inner():\n    return {SINK}(q, bmm2_scale=1.0)\n"
        "def outer():\n    return inner()\nreturn outer()",
        DROPPED,
        id="calls-another",
    ),
    pytest.param(
        f"scale = layer.v_scale\ndef run(part):\n    if self.use_graph:\n"
        f"        part = part.contiguous()\n    return {SINK}(part, bmm2_scale=scale)\n"
        "return run(q)",
        APPLIED,
        id="reads-the-enclosing-value-after-a-branch",
    ),
    pytest.param(
        f"run = None\ndef run():\n    return {SINK}(q, bmm2_scale=layer.v_scale)\nreturn run()",
        APPLIED,
        id="redefines-a-name",
    ),
    pytest.param(
        f"scale = layer.v_scale\ndef run():\n    return {SINK}(q, bmm2_scale=scale)\n"
        "return self.graph.capture(run)",
        APPLIED,
        id="handed-on-reads-the-enclosing-value",
    ),
]


@pytest.mark.parametrize(("body", "handoff"), CLOSURES)
def test_a_nested_function(body: str, handoff: KvScaleHandoff) -> None:
    verdict = verdict_of(forward(body))
    assert verdict.handoff is handoff, verdict.evidence


def test_a_recursive_nested_function_is_named() -> None:
    source = forward(f"def run():\n    return run()\nreturn {SINK}(q, bmm2_scale=run())")
    verdict = verdict_of(source)
    assert verdict.handoff is UNKNOWN
    note = "run() is recursive or nested too deep"
    assert named(source, "return run()", note, "forward_decode") in verdict.evidence


def test_a_nested_function_as_the_value_is_unknown() -> None:
    source = forward(f"def run():\n    return 1.0\nbmm2 = run\nreturn {SINK}(q, bmm2_scale=bmm2)")
    verdict = verdict_of(source)
    assert verdict.handoff is UNKNOWN
    assert named(source, "bmm2 = run", owner="forward_decode") in verdict.evidence


def closure_chain(depth: int) -> str:
    """forward_decode defines c1 ... c{depth}; each calls the next, the last reads V."""
    calls = [f"def c{i}():\n    return c{i + 1}()" for i in range(1, depth)]
    body = "\n".join([*calls, f"def c{depth}():\n    return layer.v_scale"])
    return forward(f"{body}\nreturn {SINK}(q, bmm2_scale=c1())")


@pytest.mark.parametrize(
    ("chain", "call", "owner"),
    [
        (helper_chain, "return self._h12(layer)", "_h11"),
        (closure_chain, "return c12()", "forward_decode"),
    ],
    ids=["helpers", "nested-functions"],
)
def test_calls_are_followed_eleven_deep_and_no_deeper(chain: Any, call: str, owner: str) -> None:
    assert verdict_of(chain(11)).handoff is APPLIED
    deep = chain(12)
    verdict = verdict_of(deep)
    assert verdict.handoff is UNKNOWN
    callee_name = call.removeprefix("return ").removeprefix("self.").split("(")[0]
    note = f"{callee_name}() is recursive or nested too deep"
    assert named(deep, call, note, owner) in verdict.evidence


def test_a_nested_function_handed_on_runs_with_arguments_it_cannot_pair() -> None:
    source = forward(
        f"def run(scale=layer.v_scale):\n    return {SINK}(q, bmm2_scale=scale)\n"
        "return self.graph.capture(run)"
    )
    note = "arguments this probe cannot pair"
    assert named(source, "return self.graph.capture(run)", note, "forward_decode") in (
        verdict_of(source).evidence
    )


# ---------------------------------------------------------------- where the walk starts


@pytest.mark.parametrize("helper", ["decode_step", "__call__"], ids=["public", "dunder"])
def test_a_helper_others_may_call_is_walked_with_unknown_arguments(helper: str) -> None:
    """A public method or a dunder (Python calls it) is also called from outside the module,
    with arguments nobody here sees, even when this module calls it too."""
    source = textwrap.dedent(
        f"""
        class Backend:
            def {helper}(self, q, bmm2_scale):
                return {SINK}(q, bmm2_scale=bmm2_scale)

            def forward_decode(self, q, layer):
                return self.{helper}(q, layer.v_scale)
        """
    )
    verdict = verdict_of(source)
    assert verdict.handoff is UNKNOWN
    assert f"parameter bmm2_scale of {helper}()" in verdict.evidence


def test_a_private_helper_this_module_never_calls_is_walked_on_its_own() -> None:
    source = forward(f"return {SINK}(q, bmm2_scale=layer.v_scale)") + textwrap.indent(
        f"\ndef _legacy_decode(self, q):\n    return {SINK}(q, bmm2_scale=1.0)\n", "    "
    )
    verdict = verdict_of(source)
    assert verdict.handoff is DROPPED and "in _legacy_decode()" in verdict.evidence


def test_callers_of_callers_are_walked_whatever_their_order() -> None:
    source = textwrap.dedent(
        f"""
        class Backend:
            def forward_decode(self, q, layer):
                return self.decode_step(q, 1.0)

            def decode_step(self, q, scale):
                return self._kernel(q, scale)

            def _kernel(self, q, scale):
                return {SINK}(q, bmm2_scale=scale)
        """
    )
    verdict = verdict_of(source)
    assert verdict.handoff is DROPPED
    assert named(source, "return self.decode_step(q, 1.0)", owner="forward_decode") in (
        verdict.evidence
    )


@pytest.mark.parametrize(
    ("source", "handoff"),
    [
        (f"def forward():\n    return {SINK}(bmm2_scale=1.0)\n", DROPPED),
        (f"def forward(self):\n    return {SINK}(self.q, bmm2_scale=self.v_scale)\n", APPLIED),
    ],
    ids=["no-parameters", "only-self"],
)
def test_a_root_with_few_parameters(source: str, handoff: KvScaleHandoff) -> None:
    assert verdict_of(source).handoff is handoff


@pytest.mark.parametrize("first", ["self", "cls"])
def test_self_or_cls_is_not_a_parameter_set_by_callers(first: str) -> None:
    source = forward(f"return {SINK}(q, bmm2_scale={first})").replace("(self, q", f"({first}, q")
    verdict = verdict_of(source)
    assert verdict.handoff is UNKNOWN
    assert named(source, f"def forward_decode({first}, q, layer):", owner="forward_decode") in (
        verdict.evidence
    )
    assert f"parameter {first}" not in verdict.evidence


def test_a_parameter_is_named_on_its_def_line() -> None:
    source = forward(f"return {SINK}(q, bmm2_scale=layer)")
    note = "parameter layer of forward_decode(), set by its callers"
    assert named(source, "def forward_decode(self, q, layer):", note, "forward_decode") in (
        verdict_of(source).evidence
    )


# ---------------------------------------------------------------- the verdict line


def test_every_dropping_call_is_counted() -> None:
    one = forward(f"return {SINK}(q, bmm2_scale=1.0)")
    assert verdict_of(one).evidence.endswith(", so the V scale is dropped")
    three = forward(
        f"{SINK}(q, bmm2_scale=1.0)\n{SINK}(q, bmm2_scale=2.0)\nreturn {SINK}(q, bmm2_scale=3.0)"
    )
    assert verdict_of(three).evidence.endswith(", so the V scale is dropped (and 2 more calls)")
    two = forward(f"{SINK}(q, bmm2_scale=self.a)\nreturn {SINK}(q, bmm2_scale=self.b)")
    assert verdict_of(two).evidence.endswith("(and 1 more calls)")


def test_the_verdict_line_names_the_file_and_the_path() -> None:
    prefix = "trtllm_mha_backend.py, FP8 KV-cache path: "
    assert verdict_of(forward(f"return {SINK}(q, bmm2_scale=1.0)")).evidence.startswith(prefix)
    assert verdict_of("x = 1\n").evidence == prefix + "no trtllm_batch_* call found"
    broken = verdict_of("def broken(:\n").evidence
    assert broken.startswith("trtllm_mha_backend.py does not parse: ")
    assert "(trtllm_mha_backend.py, line 1)" in broken


def test_a_call_off_the_fp8_path_before_a_dropping_one_does_not_hide_it() -> None:
    """The first call's bmm2_scale comes only from code off the FP8 path."""
    source = forward(
        f"{SINK}(q, bmm2_scale=1.0 if self.data_type == torch.bfloat16 else ())\n"
        f"return {SINK}(q, bmm2_scale=2.0)"
    )
    verdict = verdict_of(source)
    assert verdict.handoff is DROPPED
    assert named(source, f"return {SINK}(q, bmm2_scale=2.0)") in verdict.evidence


@pytest.mark.parametrize("width", [89, 90, 91, 120])
def test_a_long_line_is_cut_to_ninety_characters(width: int) -> None:
    name = "unit_" + "x" * (width - len("unit_ = 1.0"))
    culprit = f"{name} = 1.0"  # width characters once the indentation is stripped
    source = forward(f"{culprit}\nbmm2 = {name}\nreturn {SINK}(q, bmm2_scale=bmm2)")
    text = culprit if len(culprit) <= 90 else culprit[:87] + "..."
    line = line_of(source, culprit)
    assert f"`{text}` l.{line} in forward_decode()" in verdict_of(source).evidence


def test_a_constant_on_the_first_line_is_named() -> None:
    source = "_UNIT = 1.0\n" + forward(f"return {SINK}(q, bmm2_scale=_UNIT)")
    assert "`_UNIT = 1.0` l.1, so the V scale is dropped" in verdict_of(source).evidence


def test_a_fallback_alone_is_a_drop() -> None:
    """Only the value used where the V scale is missing reaches the kernel (the V scale's own
    slot holds nothing)."""
    culprit = "pair = (1.0, 1.0) if layer.v_scale is None else (layer.v_scale, ())"
    source = forward(f"{culprit}\nreturn {SINK}(q, bmm2_scale=pair[1])")
    verdict = verdict_of(source)
    assert verdict.handoff is DROPPED, verdict.evidence
    assert named(source, culprit, owner="forward_decode") in verdict.evidence


@pytest.mark.parametrize("default", ["1.0", "self.default"])
def test_a_tuple_of_fallbacks_keeps_the_v_scale_where_it_is(default: str) -> None:
    source = forward(
        f"scales = ({default}, {default}) if layer.v_scale is None else "
        "(layer.k_scale, layer.v_scale)\n"
        f"return {SINK}(q, bmm2_scale=scales[1])"
    )
    assert verdict_of(source).handoff is APPLIED


def test_the_v_scale_is_named_where_it_is_read() -> None:
    source = forward(f"return {SINK}(q, bmm2_scale=layer.v_scale)")
    culprit = f"return {SINK}(q, bmm2_scale=layer.v_scale)"
    assert verdict_of(source).evidence.endswith(
        f"comes from the layer's V scale ({named(source, culprit, owner='forward_decode')})"
    )


def test_an_awaited_helper_is_followed() -> None:
    source = textwrap.dedent(
        f"""
        class Backend:
            async def _v_scale(self, layer):
                return layer.v_scale

            async def forward_decode(self, q, layer):
                return {SINK}(q, bmm2_scale=await self._v_scale(layer))
        """
    )
    assert verdict_of(source).handoff is APPLIED


def test_an_index_into_a_class_constant_is_unknown() -> None:
    source = forward(f"return {SINK}(q, bmm2_scale=self.UNIT[0])").replace(
        "class Backend:\n", "class Backend:\n    UNIT = 1.0\n", 1
    )
    verdict = verdict_of(source)
    assert verdict.handoff is UNKNOWN, verdict.evidence


def test_a_default_that_names_a_module_constant() -> None:
    source = "_UNIT = 1.0\n" + forward(f"return {SINK}(q, bmm2_scale=self._scale(layer))").replace(
        "class Backend:\n",
        "class Backend:\n    def _scale(self, layer, default=_UNIT):\n        return default\n",
        1,
    )
    verdict = verdict_of(source)
    assert verdict.handoff is DROPPED
    assert "`_UNIT = 1.0` l.1" in verdict.evidence


@pytest.mark.parametrize(
    ("helper", "call", "culprit"),
    [
        ("def _pick(self, first, second):\n    return second", "self._pick(1.0)", None),
        ("def _scale(self, *parts):\n    return parts", "self._scale(layer.v_scale)", None),
        (
            "def _run(self, q, bmm2, extra):\n    return bmm2",
            "self._run(*head, scale)",
            "head, scale = (q, 1.0), layer.v_scale",
        ),
    ],
    ids=["a-missing-argument", "varargs", "after-a-starred-argument"],
)
def test_arguments_that_cannot_be_paired_are_unknown_at_the_call(
    helper: str, call: str, culprit: str | None
) -> None:
    body = (f"{culprit}\n" if culprit else "") + f"return {SINK}(q, bmm2_scale={call})"
    source = forward(body).replace(
        "class Backend:\n", "class Backend:\n" + textwrap.indent(helper, "    ") + "\n", 1
    )
    verdict = verdict_of(source)
    assert verdict.handoff is UNKNOWN, verdict.evidence
    note = "arguments this probe cannot pair"
    line = f"return {SINK}(q, bmm2_scale={call})"
    assert named(source, line, note, "forward_decode") in verdict.evidence


def test_keyword_arguments_gathered_in_kwargs_are_unknown() -> None:
    helper = "def _scale(self, **parts):\n    return parts['v']"
    source = forward(f"return {SINK}(q, bmm2_scale=self._scale(v=layer.v_scale))").replace(
        "class Backend:\n", "class Backend:\n" + textwrap.indent(helper, "    ") + "\n", 1
    )
    verdict = verdict_of(source)
    assert verdict.handoff is UNKNOWN
    assert named(source, "return parts['v']", owner="_scale") in verdict.evidence
