"""The root-cause probe on source text (no SGLang import); real releases are checked in
``test/integration/test_gemma4_root_cause.py``."""

from __future__ import annotations

import textwrap

import pytest

from sglang_nvfp4_patches.trtllm_mha_kv_scales import KvScaleHandoff, analyse_backend_source

DROPPED_V_SCALE = """
class Backend:
    def forward_decode(self, layer, q):
        q_scale = 1.0
        bmm1_scale = q_scale * layer.k_scale_float * layer.scaling
        bmm2_scale = 1.0
        return kernel(q, bmm1_scale=bmm1_scale, bmm2_scale=bmm2_scale)
"""

COMPUTED_FROM_V_SCALE = """
class Backend:
    def _get_bmm_scales(self, layer, q_scale=1.0):
        return q_scale * layer.k_scale_float * layer.scaling, layer.v_scale_float

    def forward_decode(self, layer, q, q_scale):
        bmm1_scale, bmm2_scale = self._get_bmm_scales(layer, q_scale)
        return kernel(q, bmm1_scale=bmm1_scale, bmm2_scale=bmm2_scale)
"""


def handoff(source: str) -> KvScaleHandoff:
    return analyse_backend_source(textwrap.dedent(source)).handoff


def test_constant_bmm2_scale_is_the_live_bug() -> None:
    verdict = analyse_backend_source(DROPPED_V_SCALE)
    assert verdict.handoff is KvScaleHandoff.DROPPED and verdict.bug_live
    assert "forward_decode()" in verdict.evidence and "l.6" in verdict.evidence


def test_scales_computed_by_a_helper_are_the_fix() -> None:
    verdict = analyse_backend_source(COMPUTED_FROM_V_SCALE)
    assert verdict.handoff is KvScaleHandoff.APPLIED and not verdict.bug_live


def test_one_dropping_path_among_fixed_ones_is_still_live() -> None:
    assert handoff(COMPUTED_FROM_V_SCALE + DROPPED_V_SCALE.replace("Backend", "Other")) is (
        KvScaleHandoff.DROPPED
    )


@pytest.mark.parametrize(
    "body",
    [
        "bmm2_scale = 1",  # an int literal drops it as surely as 1.0
        "kernel(q, bmm2_scale=1.0)",
        "bmm1_scale, bmm2_scale = x, 1.0",
        "bmm2_scale: float = 1.0",
    ],
)
def test_every_spelling_of_a_constant_is_caught(body: str) -> None:
    assert handoff(f"def forward(q, x):\n    {body}\n") is KvScaleHandoff.DROPPED


@pytest.mark.parametrize(
    "body",
    [
        "bmm2_scale = layer.v_scale_float",
        "bmm1_scale, bmm2_scale = helper(layer)",
        "kernel(q, bmm2_scale=v_scale)",
        # a default that a later line replaces from the V scale is not the bug
        "bmm2_scale = 1.0\n    if layer.v_scale is not None:\n        bmm2_scale = layer.v_scale",
    ],
)
def test_computed_values_are_the_fix(body: str) -> None:
    assert handoff(f"def forward(q, layer, helper, kernel):\n    {body}\n") is (
        KvScaleHandoff.APPLIED
    )


@pytest.mark.parametrize(
    "source",
    ["", "def forward(q):\n    return kernel(q, bmm1_scale=2.0)\n", "def broken(:\n"],
    ids=["empty", "no-bmm2", "syntax-error"],
)
def test_what_cannot_be_read_is_unknown_and_counts_as_live(source: str) -> None:
    verdict = analyse_backend_source(source)
    assert verdict.handoff is KvScaleHandoff.UNKNOWN
    assert verdict.bug_live
