"""Every refusal of ``llama4-router-weight``, its exception class and the switch that lifts it
(pure: no SGLang, no torch).

The pre-scale is exact only with top-1 routing, unquantized activations and a method that
hands its experts what the runner pre-scaled; a layer that breaks one is refused when built,
naming the switch; so is a method whose lifted layer is shown computing wrong here.
"""

from __future__ import annotations

from collections.abc import Sequence

# Where the caller cannot name the switch of the path that quantized the activations.
GENERIC_PREQUANTIZED_REMEDY = (
    "Turn off quantize-before-dispatch for this model, or use a MoE runner backend that "
    "applies router weights on the input."
)


class RouterWeightOnInputError(ValueError):
    """``apply_router_weight_on_input`` cannot be honoured for this FlashInfer CUTLASS call."""


class TopKNotOneError(RouterWeightOnInputError):
    """Router weight on the input with more than one expert per token."""


class PreQuantizedActivationsError(RouterWeightOnInputError):
    """Router weight on the input, but the activations arrive already quantized."""


TOP_K_REMEDY = "top-k must be 1 on this runner; use another MoE runner backend"


def another_runner_may_serve(refusal: str) -> bool:
    """Whether another MoE runner may serve a refused layer (the top-k refusal)."""
    return TOP_K_REMEDY in refusal


def top_k_message(got: str) -> str:
    """Why top-k > 1 is refused, and what to do (shared by the build- and forward-time checks)."""
    return (
        "apply_router_weight_on_input=True (Llama 4) is only exact on the FlashInfer CUTLASS "
        f"MoE runner with top-1 routing; got {got}. With top-k > 1 every selected expert "
        "would need its own differently scaled copy of the input, which the kernel cannot "
        f"take: {TOP_K_REMEDY} (--moe-runner-backend)."
    )


FP4_ALLGATHER_FIELD = "disable_flashinfer_cutlass_moe_fp4_allgather"
FP4_ALLGATHER_SWITCH = "--" + FP4_ALLGATHER_FIELD.replace("_", "-")
NVFP4_DISPATCH_ENV = "SGLANG_MOE_NVFP4_DISPATCH"
# Where SGLang has this field, the FlashInfer all-to-all's dispatch dtype is a server flag
# (defaulting to nvfp4 for NVFP4 MoE) and SGLang refuses the environment variable beside it.
A2A_DISPATCH_TYPE_FIELD = "flashinfer_a2a_dispatch_type"

FP4_ALLGATHER_REMEDY = (
    "They were quantized by the FP4 all-gather, which SGLang turns on by default for this "
    "runner with DP attention, EP size equal to DP size and --quantization modelopt_fp4; "
    f"turn it off with {FP4_ALLGATHER_SWITCH}."
)


def nvfp4_dispatch_remedy(has_dispatch_type_flag: bool) -> str:
    switch = f"{NVFP4_DISPATCH_ENV}=0"
    if has_dispatch_type_flag:
        switch = "--" + A2A_DISPATCH_TYPE_FIELD.replace("_", "-") + " bf16"
    return (
        "They were quantized by the FlashInfer all-to-all's NVFP4 dispatch, which SGLang "
        f"uses for NVFP4 MoE with --moe-a2a-backend flashinfer; turn it off with {switch}."
    )


class UnverifiedWrapperError(RouterWeightOnInputError):
    """A method wrapper sits between the layer and the NVFP4 MoE method."""


def prequantized_refusal(remedy: str = GENERIC_PREQUANTIZED_REMEDY) -> PreQuantizedActivationsError:
    return PreQuantizedActivationsError(
        "apply_router_weight_on_input=True (Llama 4) on the FlashInfer CUTLASS MoE runner "
        "needs the activations unquantized until the router weight has multiplied them, but "
        f"this server quantizes them before dispatch. {remedy}"
    )


def top_k_refusal(top_k: int) -> TopKNotOneError:
    return TopKNotOneError(top_k_message(f"a MoE layer routing top_k={top_k} experts per token"))


# The switch that puts each known method wrapper in front of the layer's method.
WRAPPER_SWITCHES = {
    "KTEPWrapperMethod": "--kt-weight-path (hybrid CPU/GPU experts)",
    "PagedExpertsMoEMethod": "--enable-paged-experts",
}


def wrapper_refusal(wrapper: str, method: str) -> UnverifiedWrapperError:
    switch = WRAPPER_SWITCHES.get(wrapper)
    way_out = f"run without {switch}" if switch else f"run without {wrapper}"
    return UnverifiedWrapperError(
        f"apply_router_weight_on_input=True (Llama 4): this MoE layer's {method} is wrapped "
        f"by {wrapper}, which is not known to apply the router weight on the input (experts "
        "it runs itself would weight their outputs instead: wrong results, no error). "
        f"sglang-nvfp4-patches lifts SGLang's rejection only for an unwrapped {method}; "
        f"{way_out}, or use another MoE runner backend."
    )


class LiftedLayerWrongError(RouterWeightOnInputError):
    """The lifted method is shown computing something other than ``expert(x*w)`` here."""


def served_instead(label: str, release: str, releases: Sequence[str], here: Sequence[str]) -> str:
    """What serves where the ``label`` layer computes wrong on ``release``: that checkpoint on
    ``releases``, or one in another format (``here``) on ``release``."""
    ways = [
        f"serve a {other} checkpoint of the model (shown serving on SGLang {release})"
        for other in here
    ]
    if releases:
        *others, last = releases
        one_of = f"{', '.join(others)} or {last}" if others else last
        ways.insert(0, f"serve this {label} checkpoint on SGLang {one_of} (shown serving there)")
    return ", or ".join(ways) or f"no tested SGLang release is shown serving a {label} layer"


def lifted_wrong_message(method: str, release: str, evidence: str, served: str) -> str:
    """Why a layer of ``method`` is refused on ``release``; ``served``: :func:`served_instead`."""
    return (
        f"apply_router_weight_on_input=True (Llama 4): on SGLang {release} this MoE layer's "
        f"{method}, with its rejection of the flag lifted, computes something other than "
        f"expert(x*w) on the FlashInfer CUTLASS MoE runner ({evidence}): wrong results, no "
        f"error, so sglang-nvfp4-patches refuses the layer. {served[:1].upper()}{served[1:]}."
    )
