"""The layer-build rule of ``llama4-router-weight`` (pure: no SGLang import)."""

from __future__ import annotations

import dataclasses

import pytest

from sglang_nvfp4_patches.llama4_router_weight.refusals import (
    PreQuantizedActivationsError,
    TopKNotOneError,
    UnverifiedWrapperError,
)
from sglang_nvfp4_patches.llama4_router_weight.rule import LayerFacts, refusal_for

LIFTABLE = LayerFacts(
    method="ModelOptNvFp4FusedMoEMethod",
    wrapper=None,
    top_k=1,
    fp4_allgather=False,
    nvfp4_dispatch=False,
    dispatch_type_flag=True,
)


@pytest.mark.parametrize("top_k", [1, None])
def test_a_top1_or_not_yet_known_layer_is_lifted(top_k: int | None) -> None:
    assert refusal_for(dataclasses.replace(LIFTABLE, top_k=top_k)) is None


@pytest.mark.parametrize(
    ("change", "error", "names"),
    [
        ({"top_k": 2}, TopKNotOneError, "top-k must be 1 on this runner; use another MoE runner"),
        ({"fp4_allgather": True}, PreQuantizedActivationsError, "--disable-flashinfer-cutlass-"),
        (
            {"nvfp4_dispatch": True},
            PreQuantizedActivationsError,
            "--flashinfer-a2a-dispatch-type bf16",
        ),
        (
            {"nvfp4_dispatch": True, "dispatch_type_flag": False},
            PreQuantizedActivationsError,
            "SGLANG_MOE_NVFP4_DISPATCH=0",
        ),
        ({"wrapper": "KTEPWrapperMethod"}, UnverifiedWrapperError, "--kt-weight-path"),
        ({"wrapper": "PagedExpertsMoEMethod"}, UnverifiedWrapperError, "--enable-paged-experts"),
        ({"wrapper": "VendorMoEWrapper"}, UnverifiedWrapperError, "run without VendorMoEWrapper"),
    ],
)
def test_each_refusal_names_its_switch(change: dict, error: type, names: str) -> None:
    refusal = refusal_for(dataclasses.replace(LIFTABLE, **change))
    assert type(refusal) is error and names in str(refusal)
    assert isinstance(refusal, ValueError)  # what SGLang's model loader reports as a bad config


def test_the_wrapper_is_named_before_anything_it_might_change() -> None:
    """A wrapper decides which experts run where, so it is the first thing to fix."""
    facts = dataclasses.replace(
        LIFTABLE, wrapper="KTEPWrapperMethod", top_k=2, fp4_allgather=True, nvfp4_dispatch=True
    )
    assert isinstance(refusal_for(facts), UnverifiedWrapperError)
    no_wrapper = dataclasses.replace(facts, wrapper=None)
    assert isinstance(refusal_for(no_wrapper), TopKNotOneError)
    assert "fp4-allgather" in str(refusal_for(dataclasses.replace(no_wrapper, top_k=1)))
