"""``rule.decide``, every decision of ``llama4-router-weight`` (pure: no SGLang import): from
the release facts (``None``: no row), what the runner and each method get, and which layers are
refused when built.

Reading proves a rejection present, never absent, so nothing is read: without a row each
method is ``unknown`` (lifted all the same) and the runner gets our pre-scale; "none in this
release" needs a row that shows SGLang's own layer serving. Where a row shows the lifted layer
computing something other than ``expert(x*w)``, every such layer is refused, naming what
serves."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from sglang_nvfp4_patches.llama4_router_weight.evidence import facts_of, releases_serving
from sglang_nvfp4_patches.llama4_router_weight.refusals import (
    PreQuantizedActivationsError,
    TopKNotOneError,
    UnverifiedWrapperError,
    another_runner_may_serve,
    prequantized_refusal,
)
from sglang_nvfp4_patches.llama4_router_weight.rule import (
    COMPRESSED_TENSORS,
    MODELOPT,
    Facts,
    LayerFacts,
    Part,
    decide,
    refusal_for,
)
from sglang_nvfp4_patches.patch_report import PatchState
from sglang_nvfp4_patches.release_facts import Row
from support.release import shipped_llama4_serving

LIFTABLE = LayerFacts(
    method="ModelOptNvFp4FusedMoEMethod",
    wrapper=None,
    top_k=1,
    fp4_allgather=False,
    nvfp4_dispatch=False,
    dispatch_type_flag=True,
    runner_prescaled=True,
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


def row(*cells: tuple[Part, str], release: str = "0.5.99", made_by: str = "CI") -> Facts:
    """The facts of a release-facts row giving each ``(part, cell)``."""
    facts = facts_of(Row(release, "f" * 16, {part.value: cell for part, cell in cells}, made_by))
    assert facts is not None
    return facts


SERVES = row((Part.MODELOPT, "upstream"))
LIFT_ONLY = row((Part.MODELOPT, "lift-serves"))
NEITHER = row((Part.MODELOPT, "fails"))
ELSEWHERE = row((Part.MODELOPT, "other-runner"))
WRONG = row((Part.MODELOPT, "lifted-wrong"))
UNGATHERED = row((Part.RUNNER, "not-applicable"), (Part.MODELOPT, "-"))


@pytest.mark.parametrize(
    ("facts", "state", "note", "lift"),
    [
        (None, PatchState.UNKNOWN, "cannot tell", True),
        (UNGATHERED, PatchState.UNKNOWN, "cannot tell", True),
        (SERVES, PatchState.ALREADY_UPSTREAM, "none in this release (", False),
        (ELSEWHERE, PatchState.ALREADY_UPSTREAM, "none in this release (", False),
        (LIFT_ONLY, PatchState.APPLIED, "lifted", True),
        (NEITHER, PatchState.FAILED, "not lifted", False),
        (WRONG, PatchState.APPLIED, "refused when the layer is built (", True),
    ],
)
def test_each_method_is_lifted_as_its_row_shows(
    facts: Facts | None, state: PatchState, note: str, lift: bool
) -> None:
    answer = decide(facts, Part.MODELOPT)
    assert (answer.state, answer.act) == (state, lift), answer
    assert answer.note.startswith(note), answer.note
    # only a lifted layer shown computing wrong is refused whatever the layer's facts
    assert (answer.refusal is not None) is (facts is WRONG), answer
    built = decide(facts, Part.MODELOPT, LIFTABLE)
    assert built.act is lift and (built.refusal is not None) is (facts is WRONG)


@pytest.mark.parametrize(
    ("facts", "state", "prescale"),
    [
        (None, PatchState.APPLIED, True),
        (row((Part.RUNNER, "not-shown")), PatchState.APPLIED, True),
        (row((Part.RUNNER, "upstream")), PatchState.ALREADY_UPSTREAM, False),
    ],
)
def test_the_runner_gets_our_prescale_unless_its_own_is_shown_serving(
    facts: Facts | None, state: PatchState, prescale: bool
) -> None:
    answer = decide(facts, Part.RUNNER)
    assert (answer.state, answer.act) == (state, prescale), answer


def test_a_layer_is_refused_before_anything_is_lifted() -> None:
    top_k_2 = dataclasses.replace(LIFTABLE, top_k=2)
    for facts in (None, LIFT_ONLY, WRONG):
        assert isinstance(decide(facts, Part.MODELOPT, top_k_2).refusal, TopKNotOneError)


def test_a_method_is_not_lifted_where_the_runner_does_not_honour_the_flag() -> None:
    """Our pre-scale missing from the registry (and SGLang's own not shown): the method's check
    stays, and the layer is not lifted."""
    unwrapped = dataclasses.replace(LIFTABLE, runner_prescaled=False)
    answer = decide(LIFT_ONLY, Part.MODELOPT, unwrapped)
    assert (answer.act, answer.state) == (False, PatchState.FAILED), answer
    upstream = row((Part.RUNNER, "upstream"), (Part.MODELOPT, "lift-serves"))
    assert decide(upstream, Part.MODELOPT, unwrapped).act


# 0.5.16's row as CI made it: the compressed-tensors layer, lifted, computes wrong; the
# ModelOpt one serves lifted.
def wrong_here(serving: tuple[str, ...], made_by: str = "CI") -> Facts:
    cells = ((Part.MODELOPT, "lift-serves"), (Part.COMPRESSED_TENSORS, "lifted-wrong"))
    facts = row(*cells, release="0.5.16", made_by=made_by)
    return dataclasses.replace(facts, serving={Part.COMPRESSED_TENSORS: serving})


def test_a_lifted_layer_shown_computing_wrong_is_refused_naming_what_serves() -> None:
    """What an operator reads when SGLang's model loader reports the refusal, word for word:
    the releases the shipped records show serving this checkpoint (the release itself left
    out), and the other checkpoint format its own record shows serving here."""
    answer = decide(wrong_here(("0.5.16", "0.5.17", "0.5.18")), Part.COMPRESSED_TENSORS)
    assert str(answer.refusal) == (
        "apply_router_weight_on_input=True (Llama 4): on SGLang 0.5.16 this MoE layer's "
        "CompressedTensorsW4A4Nvfp4MoE, with its rejection of the flag lifted, computes "
        "something other than expert(x*w) on the FlashInfer CUTLASS MoE runner (lifted, the "
        "layer computes something other than expert(x*w); shown on CPU by CI): wrong results, "
        "no error, "
        "so sglang-nvfp4-patches refuses the layer. Serve this compressed-tensors NVFP4 "
        "checkpoint on SGLang 0.5.17 or 0.5.18 (shown serving there), or serve a ModelOpt "
        "NVFP4 checkpoint of the model (shown serving on SGLang 0.5.16)."
    )
    # doctor's note says the same, and never that the layer is lifted
    assert answer.note.startswith("refused when the layer is built (lifted, ")
    assert "0.5.17 or 0.5.18 (shown serving there), or serve a ModelOpt NVFP4" in answer.note


@pytest.mark.parametrize(
    ("serving", "named"),
    [
        (("0.5.17",), "on SGLang 0.5.17 (shown serving there)"),
        (("0.5.17", "0.5.18", "0.5.19"), "on SGLang 0.5.17, 0.5.18 or 0.5.19 (shown serving"),
    ],
)
def test_the_releases_shown_serving_are_named_in_order(serving: tuple, named: str) -> None:
    answer = decide(wrong_here(serving), Part.COMPRESSED_TENSORS)
    assert named in str(answer.refusal), answer.refusal


def test_with_nothing_shown_serving_the_refusal_says_so() -> None:
    alone = row((Part.COMPRESSED_TENSORS, "lifted-wrong"), release="0.5.16", made_by="verify")
    answer = decide(dataclasses.replace(alone, serving={}), Part.COMPRESSED_TENSORS)
    assert str(answer.refusal).endswith(
        "(lifted, the layer computes something other than expert(x*w); shown on CPU by verify): "
        "wrong results, no error, so sglang-nvfp4-patches refuses the layer. No "
        "tested SGLang release is shown serving a compressed-tensors NVFP4 layer."
    ), answer.refusal


@pytest.mark.parametrize("rejecting", [MODELOPT, COMPRESSED_TENSORS], ids=lambda r: r.part.key)
def test_the_releases_shown_serving_come_from_the_shipped_records(rejecting: Any) -> None:
    serving = releases_serving(rejecting.part)
    assert serving and list(serving) == shipped_llama4_serving(rejecting.part)


def test_no_row_never_reads_as_upstream() -> None:
    answer = decide(None, Part.MODELOPT)
    assert answer.reason == (
        "cannot tell whether ModelOptNvFp4FusedMoEMethod.apply still rejects "
        "apply_router_weight_on_input: no record shows SGLang's own layer serving top-1 with the "
        "flag"
    )


def test_upstream_names_the_behaviour_that_shows_it() -> None:
    assert decide(SERVES, Part.MODELOPT).note == (
        "none in this release (ModelOptNvFp4FusedMoEMethod's own layer serves with top-1 and "
        "apply_router_weight_on_input (SGLang's own layer serves top-1 with the flag; shown on "
        "CPU by CI))"
    )


NOT_SHOWN = (Part.RUNNER, "not-shown")


@pytest.mark.parametrize(
    ("facts", "runner", "method"),
    [
        (None, PatchState.UNKNOWN, PatchState.UNKNOWN),
        (
            row(NOT_SHOWN, (Part.MODELOPT, "lift-serves")),
            PatchState.NOT_PATCHED,
            PatchState.NOT_PATCHED,
        ),
        (
            row(NOT_SHOWN, (Part.MODELOPT, "lifted-wrong")),
            PatchState.NOT_PATCHED,
            PatchState.NOT_PATCHED,
        ),
        (row(NOT_SHOWN, (Part.MODELOPT, "fails")), PatchState.NOT_PATCHED, PatchState.FAILED),
        (
            row((Part.RUNNER, "upstream"), (Part.MODELOPT, "upstream")),
            *[PatchState.ALREADY_UPSTREAM] * 2,
        ),
    ],
)
def test_where_nothing_is_patched_each_part_says_whether_its_bug_is_live(
    facts: Facts | None, runner: PatchState, method: PatchState
) -> None:
    assert decide(facts, Part.RUNNER).unpatched[0] is runner
    state, reason = decide(facts, Part.MODELOPT).unpatched
    assert state is method, reason
    if state is PatchState.NOT_PATCHED:
        assert (
            reason == "ModelOptNvFp4FusedMoEMethod.apply still rejects apply_router_weight_on_input"
        )
