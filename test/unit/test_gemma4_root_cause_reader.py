"""The root-cause probe on small sources written for each case (no SGLang import): one per
trap that must not read as fixed, one per way of being right. Real releases and hand-edited
copies of the installed file are checked in ``test/integration/test_gemma4_root_cause.py``
and ``test/integration/test_gemma4_probe_edits.py``."""

from __future__ import annotations

import textwrap

import pytest

from sglang_nvfp4_patches.gemma4_attention.v_scale_question import (
    KvScaleHandoff,
    analyse_backend_source,
)
from support.probe_sources import FORWARD, line_of, verdict_of

APPLIED, DROPPED, UNKNOWN = KvScaleHandoff.APPLIED, KvScaleHandoff.DROPPED, KvScaleHandoff.UNKNOWN

# A backend shaped like sglang#28144: a static reader of one scale attribute with fallbacks, a
# helper whose non-FP8 branch returns early with a unit bmm2, and call sites that unpack it.
# {HELPER_FP8_RETURN} and {AFTER_UNPACK} are where the traps go.
BACKEND = """
import torch
import flashinfer

{MODULE}

class Backend:
    @staticmethod
    def _scalar(layer, float_attr, attr):
        scale = getattr(layer, float_attr, None)
        if scale is None:
            scale = getattr(layer, attr, None)
        if scale is None:
            return 1.0
        scale = float(scale)
        return scale if scale > 0.0 else 1.0

    def _scales(self, layer, q_scale=1.0):
        if self.data_type != torch.float8_e4m3fn:
            return layer.scaling, 1.0
        k_scale = self._scalar(layer, "k_scale_float", "k_scale")
        v_scale = {V_SCALE}
        return {HELPER_FP8_RETURN}

    def forward_decode(self, q, layer):
        bmm1_scale, bmm2_scale = self._scales(layer, 1.0)
        {AFTER_UNPACK}
        return flashinfer.decode.trtllm_batch_decode_with_kv_cache(
            query=q,
            bmm1_scale=bmm1_scale,
            bmm2_scale=bmm2_scale,
        )
{EXTRA}
"""
RIGHT = {
    "MODULE": "",
    "V_SCALE": 'self._scalar(layer, "v_scale_float", "v_scale")',
    "HELPER_FP8_RETURN": "q_scale * k_scale * layer.scaling, v_scale",
    "AFTER_UNPACK": "pass",
    "EXTRA": "",
}

BF16_ONLY_METHOD = """
    def forward_bf16_kv(self, q, layer):
        if self.data_type == torch.float8_e4m3fn:
            raise ValueError("BF16 KV cache only")
        return flashinfer.decode.trtllm_batch_decode_with_kv_cache(
            query=q, bmm1_scale=layer.scaling, bmm2_scale=1.0
        )
"""


def backend(**changes: str) -> str:
    return BACKEND.format(**{**RIGHT, **changes})


# ---------------------------------------------------------------- the traps of the issue


@pytest.mark.parametrize(
    ("changes", "culprit"),
    [
        pytest.param(
            {"HELPER_FP8_RETURN": "q_scale * k_scale * layer.scaling, 1.0"},
            "return q_scale * k_scale * layer.scaling, 1.0",
            id="helper-fp8-branch-returns-1.0",
        ),
        pytest.param(
            {"MODULE": "_UNIT_SCALE = 1.0", "V_SCALE": "_UNIT_SCALE"},
            "_UNIT_SCALE = 1.0",
            id="v-scale-is-a-module-constant",
        ),
        pytest.param(
            {"AFTER_UNPACK": "bmm2_scale = float(1)"},
            "bmm2_scale = float(1)",
            id="call-site-overrides-with-float(1)",
        ),
    ],
)
def test_a_constant_behind_a_call_is_dropped(changes: dict[str, str], culprit: str) -> None:
    source = backend(**changes)
    verdict = verdict_of(source)
    assert verdict.handoff is DROPPED and verdict.bug_live, verdict.evidence
    assert f"`{culprit}` l.{line_of(source, culprit)}" in verdict.evidence
    assert "trtllm_batch_decode_with_kv_cache()" in verdict.evidence


def test_a_bf16_only_method_with_a_unit_bmm2_is_off_the_fp8_path() -> None:
    verdict = verdict_of(backend(EXTRA=BF16_ONLY_METHOD))
    assert verdict.handoff is APPLIED and not verdict.bug_live, verdict.evidence
    assert "all 1 trtllm_batch_* calls" in verdict.evidence


# ---------------------------------------------------------------- ways of being right


def test_a_private_helper_called_only_off_the_fp8_path_has_no_vote() -> None:
    source = """
    import torch
    import flashinfer

    class Backend:
        def _bf16_decode(self, q, layer):
            return flashinfer.decode.trtllm_batch_decode_with_kv_cache(q, bmm2_scale=1.0)

        def forward_decode(self, q, layer):
            if {TEST}:
                return self._bf16_decode(q, layer)
            return flashinfer.decode.trtllm_batch_decode_with_kv_cache(q, bmm2_scale=layer.v_scale)
    """
    off_path = verdict_of(source.replace("{TEST}", "self.data_type == torch.bfloat16"))
    assert off_path.handoff is APPLIED, off_path.evidence
    on_path = verdict_of(source.replace("{TEST}", "self.is_xqa_impl"))
    assert on_path.handoff is DROPPED and "in _bf16_decode()" in on_path.evidence


def test_the_helper_shape_of_the_fix_is_applied() -> None:
    source = backend()
    verdict = verdict_of(source)
    assert verdict.handoff is APPLIED, verdict.evidence
    # where the V scale's name is written: the reader's caller, not the reader's getattr
    read = 'v_scale = self._scalar(layer, "v_scale_float", "v_scale")'
    assert f"`{read}` l.{line_of(source, read)} in _scales()" in verdict.evidence


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(
            "bmm2_scale = layer.v_scale_float\n"
            "return trtllm_batch_decode_with_kv_cache(q, bmm2_scale=bmm2_scale)",
            id="attribute",
        ),
        pytest.param(
            "return trtllm_batch_decode_with_kv_cache(q, bmm2_scale=layer.v_scale * self.o_scale)",
            id="arithmetic-on-it",
        ),
        pytest.param(
            "bmm2_scale = 1.0\n"
            "if layer.v_scale is not None:\n"
            "    bmm2_scale = layer.v_scale.item()\n"
            "return trtllm_batch_decode_with_kv_cache(q, bmm2_scale=bmm2_scale)",
            id="unit-default-when-the-layer-has-no-v-scale",
        ),
        pytest.param(
            "v_scale = layer.v_scale if layer.v_scale is not None else self.default_scale\n"
            "return trtllm_batch_decode_with_kv_cache(q, bmm2_scale=v_scale)",
            id="a-default-tensor-when-the-layer-has-none",
        ),
        pytest.param(
            'v_scale = getattr(layer, "v_scale_float", None) or 1.0\n'
            "return trtllm_batch_decode_with_kv_cache(q, bmm2_scale=v_scale)",
            id="getattr-or-unit",
        ),
        pytest.param(
            "if self.data_type == torch.float8_e4m3fn:\n"
            "    scales = (layer.k_scale, layer.v_scale)\n"
            "else:\n"
            "    scales = (1.0, 1.0)\n"
            "return trtllm_batch_decode_with_kv_cache(q, bmm2_scale=scales[1])",
            id="fp8-test-with-else",
        ),
        pytest.param(
            "is_fp8 = self.kv_cache_dtype == torch.float8_e4m3fn\n"
            "if not is_fp8:\n"
            "    return trtllm_batch_decode_with_kv_cache(q, bmm2_scale=1.0)\n"
            "return trtllm_batch_decode_with_kv_cache(q, bmm2_scale=layer.v_scale or 1.0)",
            id="fp8-flag-early-return",
        ),
        pytest.param(
            "scale = layer.v_scale if self.data_type in (torch.float8_e4m3fn,) else 1.0\n"
            "return trtllm_batch_decode_with_kv_cache(q, bmm2_scale=scale)",
            id="conditional-on-the-dtype",
        ),
    ],
)
def test_values_from_the_v_scale_are_applied(body: str) -> None:
    source = FORWARD.format(body=textwrap.indent(body, " " * 8))
    verdict = verdict_of(source)
    assert verdict.handoff is APPLIED, verdict.evidence


def test_a_private_runner_and_its_closure_follow_the_callers_argument() -> None:
    source = """
    import flashinfer

    class Backend:
        def _run(self, q, *, bmm1_scale, bmm2_scale):
            def one_group(part):
                return flashinfer.decode.trtllm_batch_decode_with_kv_cache(
                    part, bmm1_scale=bmm1_scale, bmm2_scale=bmm2_scale
                )
            return one_group(q)

        def forward_decode(self, q, layer):
            return self._run(q, bmm1_scale=layer.scaling, bmm2_scale=layer.v_scale)

        def forward_extend(self, q, layer):
            return self._run(q, bmm1_scale=layer.scaling, bmm2_scale={extend})
    """
    assert verdict_of(source.format(extend="layer.v_scale")).handoff is APPLIED
    dropped = verdict_of(source.format(extend="1.0"))
    assert dropped.handoff is DROPPED and "in forward_extend()" in dropped.evidence


def test_a_runner_handed_on_as_a_value_has_callers_out_of_reach() -> None:
    source = """
    import functools
    import flashinfer

    class Backend:
        def _run(self, q, *, bmm2_scale):
            return flashinfer.decode.trtllm_batch_decode_with_kv_cache(q, bmm2_scale=bmm2_scale)

        def forward_decode(self, q, layer):
            return self._run(q, bmm2_scale=layer.v_scale)

        def forward_extend(self, q, layer):
            return functools.partial(self._run, bmm2_scale=1.0)(q)
    """
    verdict = verdict_of(source)
    assert verdict.handoff is UNKNOWN, verdict.evidence
    assert "parameter bmm2_scale of _run()" in verdict.evidence


def test_the_same_helper_reading_the_k_scale_is_no_evidence() -> None:
    """Without the V scale, the reader's ``return 1.0`` is no fallback: it reaches the kernel."""
    source = backend(V_SCALE='self._scalar(layer, "k_scale_float", "k_scale")')
    verdict = verdict_of(source)
    assert verdict.handoff is DROPPED, verdict.evidence
    assert f"`return 1.0` l.{line_of(source, 'return 1.0')} in _scalar()" in verdict.evidence


# ---------------------------------------------------------------- constants, in any spelling


@pytest.mark.parametrize(
    "body",
    [
        "bmm2_scale = 1",
        "bmm2_scale = 1.0 if self.high_precision else 2.0",  # constant arms
        "bmm2_scale = layer.v_scale if self.use_v_scale else 1.0",  # not a missing-V fallback
        "bmm2_scale: float = 1.0",
        "bmm2_scale = layer.v_scale\n"
        "if layer.v_scale is not None:\n"
        "    bmm2_scale = 1.0",  # the unit value where the V scale exists
        "bmm2_scale = layer.v_scale * 0",
        "bmm2_scale = layer.v_scale / layer.v_scale",
        "bmm1_scale, bmm2_scale = layer.scaling, 1.0",
        "bmm2_scale = self.UNIT",  # a class attribute
    ],
)
def test_a_constant_reaching_the_kernel_is_dropped(body: str) -> None:
    source = FORWARD.format(
        body=textwrap.indent(
            f"{body}\nreturn trtllm_batch_decode_with_kv_cache(q, bmm2_scale=bmm2_scale)", " " * 8
        )
    ).replace("class Backend:", "class Backend:\n    UNIT = 1.0\n")
    verdict = verdict_of(source)
    assert verdict.handoff is DROPPED, verdict.evidence


def test_no_bmm2_scale_is_flashinfers_default_and_dropped() -> None:
    source = FORWARD.format(body="        return trtllm_batch_decode_with_kv_cache(q, layer)")
    verdict = verdict_of(source)
    assert verdict.handoff is DROPPED
    assert "FlashInfer's default bmm2_scale" in verdict.evidence


# FlashInfer's decode entry point: query, kv_cache, workspace_buffer, block_tables, seq_lens,
# max_seq_len, bmm1_scale, then bmm2_scale (default 1.0).
SEVEN_POSITIONAL = "q, kv_cache, self.workspace, block_tables, seq_lens, max_seq_len, layer.scaling"


def test_as_many_positional_arguments_as_before_bmm2_scale_leave_it_at_the_default() -> None:
    call = f"return trtllm_batch_decode_with_kv_cache({SEVEN_POSITIONAL})"
    source = FORWARD.format(body=f"        {call}")
    verdict = verdict_of(source)
    assert verdict.handoff is DROPPED, verdict.evidence
    line = line_of(textwrap.dedent(source), call)
    assert f"(FlashInfer's default bmm2_scale) l.{line} in forward_decode()" in verdict.evidence


def test_one_more_positional_argument_supplies_bmm2_scale() -> None:
    call = f"return trtllm_batch_decode_with_kv_cache({SEVEN_POSITIONAL}, layer.v_scale)"
    source = FORWARD.format(body=f"        {call}")
    verdict = verdict_of(source)
    assert verdict.handoff is UNKNOWN, verdict.evidence  # supplied, but not followed by position
    line = line_of(textwrap.dedent(source), call)
    assert f"(bmm2_scale by position or **kwargs) l.{line} in forward_decode()" in verdict.evidence
    assert "default" not in verdict.evidence


GUARDED = """
import torch
from flashinfer.decode import trtllm_batch_decode_with_kv_cache

class Backend:
    def forward_decode(self, q, layer):
        if {flag}:
            bmm2_scale = layer.v_scale
        else:
            bmm2_scale = 1.0
        return trtllm_batch_decode_with_kv_cache(q, bmm2_scale=bmm2_scale)
"""


@pytest.mark.parametrize("flag", ["self.use_fp8_gemm", "self.fp8_linear", "use_fp8_gemm"])
def test_an_fp8_flag_not_about_the_kv_cache_is_no_kv_cache_guard(flag: str) -> None:
    """Its else branch may run with an FP8 KV cache, so the unit bmm2 there reaches the kernel."""
    source = textwrap.dedent(GUARDED.format(flag=flag))
    verdict = verdict_of(source)
    assert verdict.handoff is DROPPED, verdict.evidence
    line = line_of(source, "bmm2_scale = 1.0")
    assert f"is a constant: `bmm2_scale = 1.0` l.{line} in forward_decode()" in verdict.evidence


@pytest.mark.parametrize("flag", ["self.is_fp8_kv", "self.kv_cache_is_fp8", "self.fp8_kvcache"])
def test_an_fp8_kv_cache_flag_keeps_its_else_branch_off_the_fp8_path(flag: str) -> None:
    verdict = verdict_of(GUARDED.format(flag=flag))
    assert verdict.handoff is APPLIED, verdict.evidence


def test_one_dropping_call_among_fixed_ones_is_dropped() -> None:
    source = backend(
        EXTRA="""
    def forward_extend(self, q, layer):
        return flashinfer.prefill.trtllm_batch_context_with_kv_cache(q, bmm2_scale=1.0)
"""
    )
    verdict = verdict_of(source)
    assert verdict.handoff is DROPPED
    assert "trtllm_batch_context_with_kv_cache()" in verdict.evidence


# ---------------------------------------------------------------- what cannot be followed


@pytest.mark.parametrize(
    ("body", "stuck_at"),
    [
        (
            "k_scale, v_scale = self.quant_method.get_bmm_scales(layer.layer_id)\n"
            "return trtllm_batch_decode_with_kv_cache(q, bmm2_scale=v_scale)",
            "k_scale, v_scale = self.quant_method.get_bmm_scales(layer.layer_id)",
        ),
        (
            "return trtllm_batch_decode_with_kv_cache(q, bmm2_scale=OUTSIDE_SCALE)",
            "return trtllm_batch_decode_with_kv_cache(q, bmm2_scale=OUTSIDE_SCALE)",
        ),
        (
            "return trtllm_batch_decode_with_kv_cache(q, **self.kernel_kwargs)",
            "return trtllm_batch_decode_with_kv_cache(q, **self.kernel_kwargs)",
        ),
        (
            "return trtllm_batch_decode_with_kv_cache(q, bmm2_scale=layer.scaling)",
            "return trtllm_batch_decode_with_kv_cache(q, bmm2_scale=layer.scaling)",
        ),
    ],
    ids=["another-module's-method", "imported-name", "kwargs", "not-a-v-scale"],
)
def test_what_cannot_be_followed_is_unknown_and_named(body: str, stuck_at: str) -> None:
    source = FORWARD.format(body=textwrap.indent(body, " " * 8)).replace(
        "import torch", "import torch\nfrom .scales import OUTSIDE_SCALE"
    )
    verdict = verdict_of(source)
    assert verdict.handoff is UNKNOWN and verdict.bug_live, verdict.evidence
    assert f"`{stuck_at}`" in verdict.evidence
    assert f"l.{line_of(textwrap.dedent(source), stuck_at)} in forward_decode()" in verdict.evidence


def test_a_public_parameter_comes_from_outside_and_is_unknown() -> None:
    source = FORWARD.replace("(self, q, layer)", "(self, q, layer, bmm2_scale)").format(
        body="        return trtllm_batch_decode_with_kv_cache(q, bmm2_scale=bmm2_scale)"
    )
    verdict = verdict_of(source)
    assert verdict.handoff is UNKNOWN
    assert "parameter bmm2_scale of forward_decode()" in verdict.evidence


@pytest.mark.parametrize(
    "source",
    [
        "",
        "def forward(q):\n    return kernel(q, bmm1_scale=2.0)\n",
        "import torch\n"
        "def forward(self, q):\n"
        "    if self.data_type == torch.bfloat16:\n"
        "        return trtllm_batch_decode_with_kv_cache(q, bmm2_scale=1.0)\n",
        "def broken(:\n",
    ],
    ids=["empty", "no-kernel-call", "only-off-the-fp8-path", "syntax-error"],
)
def test_no_evidence_at_all_is_unknown_and_counts_as_live(source: str) -> None:
    verdict = analyse_backend_source(source)
    assert verdict.handoff is UNKNOWN
    assert verdict.bug_live
