"""The layer-build rule of ``llama4-router-weight`` (pure: no SGLang import)."""

from __future__ import annotations

import dataclasses

import pytest

from sglang_nvfp4_patches.llama4_router_weight.refusals import (
    PreQuantizedActivationsError,
    TopKNotOneError,
    UnverifiedWrapperError,
    another_runner_may_serve,
    prequantized_refusal,
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
    # explain searches another runner for the top-k refusal alone (the patch's runner_may_lift)
    assert another_runner_may_serve(str(refusal)) is (error is TopKNotOneError)


def test_the_wrapper_is_named_before_anything_it_might_change() -> None:
    """A wrapper decides which experts run where, so it is the first thing to fix."""
    facts = dataclasses.replace(
        LIFTABLE, wrapper="KTEPWrapperMethod", top_k=2, fp4_allgather=True, nvfp4_dispatch=True
    )
    assert isinstance(refusal_for(facts), UnverifiedWrapperError)
    no_wrapper = dataclasses.replace(facts, wrapper=None)
    assert isinstance(refusal_for(no_wrapper), TopKNotOneError)
    assert "fp4-allgather" in str(refusal_for(dataclasses.replace(no_wrapper, top_k=1)))


# What an operator reads when SGLang's model loader reports the refusal, word for word.
PREQUANTIZED = (
    "apply_router_weight_on_input=True (Llama 4) on the FlashInfer CUTLASS MoE runner needs "
    "the activations unquantized until the router weight has multiplied them, but this server "
    "quantizes them before dispatch. "
)
MESSAGES = [
    pytest.param(
        {"top_k": 4},
        "apply_router_weight_on_input=True (Llama 4) is only exact on the FlashInfer CUTLASS MoE "
        "runner with top-1 routing; got a MoE layer routing top_k=4 experts per token. With "
        "top-k > 1 every selected expert would need its own differently scaled copy of the "
        "input, which the kernel cannot take: top-k must be 1 on this runner; use another MoE "
        "runner backend (--moe-runner-backend).",
        id="top-k",
    ),
    pytest.param(
        {"fp4_allgather": True},
        PREQUANTIZED + "They were quantized by the FP4 all-gather, which SGLang turns on by "
        "default for this runner with DP attention, EP size equal to DP size and --quantization "
        "modelopt_fp4; turn it off with --disable-flashinfer-cutlass-moe-fp4-allgather.",
        id="fp4-allgather",
    ),
    pytest.param(
        {"nvfp4_dispatch": True},
        PREQUANTIZED + "They were quantized by the FlashInfer all-to-all's NVFP4 dispatch, which "
        "SGLang uses for NVFP4 MoE with --moe-a2a-backend flashinfer; turn it off with "
        "--flashinfer-a2a-dispatch-type bf16.",
        id="nvfp4-dispatch",
    ),
    pytest.param(
        {"nvfp4_dispatch": True, "dispatch_type_flag": False},
        PREQUANTIZED + "They were quantized by the FlashInfer all-to-all's NVFP4 dispatch, which "
        "SGLang uses for NVFP4 MoE with --moe-a2a-backend flashinfer; turn it off with "
        "SGLANG_MOE_NVFP4_DISPATCH=0.",
        id="nvfp4-dispatch-before-0.5.20",
    ),
    pytest.param(
        {"wrapper": "KTEPWrapperMethod"},
        "apply_router_weight_on_input=True (Llama 4): this MoE layer's "
        "ModelOptNvFp4FusedMoEMethod is wrapped by KTEPWrapperMethod, which is not known to "
        "apply the router weight on the input (experts it runs itself would weight their outputs "
        "instead: wrong results, no error). sglang-nvfp4-patches lifts SGLang's rejection only "
        "for an unwrapped ModelOptNvFp4FusedMoEMethod; run without --kt-weight-path (hybrid "
        "CPU/GPU experts), or use another MoE runner backend.",
        id="known-wrapper",
    ),
    pytest.param(
        {"wrapper": "VendorMoEWrapper", "method": "CompressedTensorsW4A4Nvfp4MoE"},
        "apply_router_weight_on_input=True (Llama 4): this MoE layer's "
        "CompressedTensorsW4A4Nvfp4MoE is wrapped by VendorMoEWrapper, which is not known to "
        "apply the router weight on the input (experts it runs itself would weight their outputs "
        "instead: wrong results, no error). sglang-nvfp4-patches lifts SGLang's rejection only "
        "for an unwrapped CompressedTensorsW4A4Nvfp4MoE; run without VendorMoEWrapper, or use "
        "another MoE runner backend.",
        id="other-wrapper",
    ),
]


@pytest.mark.parametrize(("change", "message"), MESSAGES)
def test_the_refusal_reads_in_full(change: dict, message: str) -> None:
    assert str(refusal_for(dataclasses.replace(LIFTABLE, **change))) == message


def test_activations_quantized_by_an_unnamed_path_get_the_generic_remedy() -> None:
    assert str(prequantized_refusal()) == PREQUANTIZED + (
        "Turn off quantize-before-dispatch for this model, or use a MoE runner backend that "
        "applies router weights on the input."
    )
