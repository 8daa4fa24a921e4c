"""``llama4-router-weight``'s contract (``verify``), through SGLang's real NVFP4 MoE methods on
a simulated SM120, FlashInfer's kernel replaced by its CPU stand-in
(:mod:`sglang_nvfp4_patches.simulation.cutlass_kernel`): top-1 with the flag computes
``expert(x * w)`` with float32 unit final scales (twice weighted: vllm#43694); top-2 without
it is unchanged; top-k 2 and the FP4 all-gather are refused at build; each method's layer
as a server loads it serves; the evidence (:mod:`.evidence`) equals this SGLang's row.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

import torch

from sglang_nvfp4_patches.check_result import (
    CheckFailed,
    CheckResult,
    NotApplicable,
    Outcome,
    run_check,
)
from sglang_nvfp4_patches.evidence_check import agrees_or_kept
from sglang_nvfp4_patches.llama4_router_weight.evidence import cells, gather, run_as_the_server
from sglang_nvfp4_patches.llama4_router_weight.flag_free_view import FLAG
from sglang_nvfp4_patches.llama4_router_weight.method_lift import answer_here, is_lifted
from sglang_nvfp4_patches.llama4_router_weight.refusals import (
    FP4_ALLGATHER_SWITCH,
    LiftedLayerWrongError,
    RouterWeightOnInputError,
)
from sglang_nvfp4_patches.llama4_router_weight.rule import (
    CUTLASS,
    MODELOPT,
    NAME,
    REJECTING_METHODS,
    RejectingMethod,
)
from sglang_nvfp4_patches.reference.moe_meaning import moe_meaning
from sglang_nvfp4_patches.simulation.bundled import LLAMA4_NVFP4, LLAMA4_NVFP4_CT
from sglang_nvfp4_patches.simulation.cutlass_kernel import (
    RUNNER_MODULE,
    RecordingCutlassKernel,
    cpu_cutlass_kernel,
    cuda_moves_stay_on_cpu,
)
from sglang_nvfp4_patches.simulation.llama4_layers import (
    Llama4Layer,
    batch,
    compressed_tensors_layer,
    modelopt_layer,
    runs_on_flashinfer_cutlass,
)
from sglang_nvfp4_patches.simulation.scheduler import moe_layer_build_on, single_rank_tp_group
from sglang_nvfp4_patches.simulation.server_args import quiet_sglang

TOKENS = 7
EVIDENCE_CHECK = "evidence (SGLang's own runner and methods, on CPU)"
MODELOPT_FP4 = {"quantization": "modelopt_fp4"}
DP_ATTENTION_EP = {"tp_size": 2, "dp_size": 2, "enable_dp_attention": True, "ep_size": 2}
TOLERANCE = 2e-2  # bfloat16 output against the float32 meaning
DOUBLE_WEIGHTING = "vllm#43694's double weighting"


def _built_on_cutlass(moe: Llama4Layer, what: str) -> None:
    moe.build()
    if not runs_on_flashinfer_cutlass(moe):
        backend = getattr(getattr(moe.holder, "runner", None), "runner_backend", None)
        raise NotApplicable(
            f"this SGLang builds the {getattr(backend, 'value', backend)} MoE runner for a "
            f"{what} layer on SM120, not flashinfer_cutlass"
        )
    if moe.holder is moe.method:
        return  # ModelOpt: the layer holds its weights as post-processing leaves them
    moe.method.process_weights_after_loading(moe.layer)  # FusedMoE's order: after the runner


def _relative_error(out: torch.Tensor, expected: torch.Tensor) -> float:
    return float((out.float() - expected).abs().max() / expected.abs().max().clamp_min(1e-6))


def _within_tolerance(out: torch.Tensor, expected: torch.Tensor, meaning: str) -> float:
    error = _relative_error(out, expected)
    if error > TOLERANCE:
        raise CheckFailed(f"output differs from {meaning} (relative error {error:.3g})")
    return error


def _forward(
    kernel: RecordingCutlassKernel, moe: Llama4Layer, top_k: int, seed: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
    """One forward of ``moe``: its batch, output and the kernel's one call."""
    x, weights, ids = batch(TOKENS, top_k, torch.bfloat16, seed=seed)
    kernel.calls.clear()
    out = moe.apply(x, weights, ids)
    if len(kernel.calls) != 1:
        raise CheckFailed(f"the CUTLASS kernel was called {len(kernel.calls)} times, not once")
    return x, weights, ids, out, kernel.calls[0]


def _top1_with_the_flag(
    kernel: RecordingCutlassKernel, build: Callable[..., Llama4Layer], what: str
) -> str:
    moe = build(top_k=1)
    try:
        _built_on_cutlass(moe, what)
    except LiftedLayerWrongError as refused:  # only where the record shows it computing wrong
        return f"refused when the layer is built: {refused}"
    x, weights, ids, out, call = _forward(kernel, moe, 1, seed=1)
    expected = moe_meaning(x, weights, ids, moe.w13, moe.w2, on_input=True)
    scales = call["token_final_scales"]
    prescaled = torch.equal(call["input"], x * weights.to(x.dtype))
    if prescaled and torch.allclose(scales.float(), weights.float()):
        raise CheckFailed(
            "the router weight is applied twice: the kernel got x*w and the router weights "
            f"again as its final scales ({DOUBLE_WEIGHTING}); output error "
            f"{_relative_error(out, expected):.2f} against expert(x*w)"
        )
    if not prescaled:
        raise CheckFailed("the kernel's input is not x*w: the router weight is not on the input")
    if scales.dtype != torch.float32 or not torch.all(scales == 1):
        raise CheckFailed(f"the kernel's final scales are not float32 ones ({scales.dtype})")
    error = _within_tolerance(out, expected, "expert(x*w)")
    return (
        f"output = expert(x*w) (relative error {error:.1e}); the weight is applied once, on the "
        "input, and the kernel got float32 unit final scales"
    )


def _top2_without_the_flag(kernel: RecordingCutlassKernel) -> str:
    moe = modelopt_layer(top_k=2, on_input=False)
    _built_on_cutlass(moe, "ModelOpt NVFP4")
    x, weights, ids, out, call = _forward(kernel, moe, 2, seed=2)
    if not torch.equal(call["input"], x):
        raise CheckFailed("the kernel's input is not the unscaled hidden states")
    scales = call["token_final_scales"]
    if scales.dtype != torch.float32 or not torch.allclose(scales, weights.float()):
        raise CheckFailed("the kernel's final scales are not the router weights in float32")
    expected = moe_meaning(x, weights, ids, moe.w13, moe.w2, on_input=False)
    error = _within_tolerance(out, expected, "sum_k w_k*expert_k(x)")
    return f"output = sum_k w_k*expert_k(x), unchanged (relative error {error:.1e})"


def _refused(
    build: Callable[[], Llama4Layer], names: tuple[str, ...], top_k: int, prequantized: bool = False
) -> str:
    """Refused when the layer is built, naming the switch; or, where this SGLang's method
    accepts the flag by itself (nothing lifted, so nothing of ours refuses it), refused by
    SGLang at the first forward: never computed with the weight on the output."""
    moe = build()
    try:
        moe.build()
    except RouterWeightOnInputError as refused:
        missing = [name for name in names if name not in str(refused)]
        if missing:
            raise CheckFailed(
                f"refused, but the message does not name {missing}: {refused}"
            ) from refused
        return f"refused when the layer is built: {refused}"
    if is_lifted(MODELOPT):
        raise CheckFailed(
            "the layer was built with the method's check lifted: the CUTLASS kernel would "
            "weight the expert outputs instead of the inputs"
        )
    x, weights, ids = batch(TOKENS, top_k, torch.bfloat16, seed=3)
    scale = torch.ones(TOKENS, 1) if prequantized else None
    try:
        moe.apply(x, weights, ids, scale)
    except Exception as refused:  # SGLang's own check, whatever its type
        if FLAG not in str(refused):
            raise
        return (
            "built (this SGLang's method accepts the flag), and refused by SGLang at the "
            f"first forward: {refused}"
        )
    raise CheckFailed(
        "the layer was built and computed: the CUTLASS kernel weights the expert outputs "
        "instead of the inputs"
    )


def _as_a_server_loads_it(rejecting: RejectingMethod) -> str:
    """Served, or refused when it is built where the record shows it computing wrong."""
    run = run_as_the_server(rejecting.part)
    refusal = answer_here(rejecting).refusal
    if run["verdict"] == "refused" and refusal is not None and str(refusal) in run["detail"]:
        return f"refused {run['detail']}"
    if run["runner"] != CUTLASS:
        raise NotApplicable(f"this SGLang builds the {run['runner']} MoE runner for it on SM120")
    if run["verdict"] != "serves":
        raise CheckFailed(f"the layer {run['verdict']}: {run['detail']}")
    return run["detail"]


def _evidence() -> str:
    found = gather()
    summary = "; ".join(f"{part.key}: {fact['state'].value}" for part, fact in found.items())
    return agrees_or_kept(cells(found), summary)


def run_checks() -> list[CheckResult]:
    """Every check (call in a process where SGLang loaded the plugin)."""
    from sglang_nvfp4_patches.post_import import module_exists

    if not module_exists(RUNNER_MODULE):
        reason = "this SGLang has no FlashInfer CUTLASS MoE runner; the patch is not applicable"
        return [CheckResult(NAME, "CUTLASS runner", Outcome.NOT_APPLICABLE, reason)]
    results: list[CheckResult] = []
    with quiet_sglang(), cpu_cutlass_kernel() as kernel, cuda_moves_stay_on_cpu():

        def check(
            name: str, body: Callable[[], str], model: Any = LLAMA4_NVFP4, **flags: Any
        ) -> None:
            def scheduled() -> str:  # on a simulated SM120 scheduler (one rank: its TP group)
                one_rank = single_rank_tp_group() if flags.get("tp_size", 1) == 1 else nullcontext()
                with moe_layer_build_on("sm120", model, **flags), one_rank:
                    return body()

            results.append(run_check(NAME, name, scheduled))

        modelopt_top1 = functools.partial(
            _top1_with_the_flag, kernel, modelopt_layer, "ModelOpt NVFP4"
        )
        check("ModelOpt NVFP4 top-1 with the flag", modelopt_top1, **MODELOPT_FP4)
        top2 = functools.partial(_top2_without_the_flag, kernel)
        check("ModelOpt NVFP4 top-2 without the flag", top2, **MODELOPT_FP4)
        top_k_2 = functools.partial(_refused, lambda: modelopt_layer(top_k=2), ("top_k=2",), 2)
        check("ModelOpt NVFP4 top-k 2 with the flag", top_k_2, **MODELOPT_FP4)
        fp4_allgather = functools.partial(
            _refused, lambda: modelopt_layer(top_k=None), (FP4_ALLGATHER_SWITCH,), 1, True
        )
        all_gather_flags = {**MODELOPT_FP4, **DP_ATTENTION_EP, "moe_runner_backend": CUTLASS}
        check("ModelOpt NVFP4 FP4 all-gather", fp4_allgather, **all_gather_flags)
        ct_top1 = functools.partial(
            _top1_with_the_flag, kernel, compressed_tensors_layer, "compressed-tensors"
        )
        check("compressed-tensors NVFP4 top-1 with the flag", ct_top1, LLAMA4_NVFP4_CT)
    with quiet_sglang():
        for rejecting in REJECTING_METHODS:
            name = f"{rejecting.label} top-1 with the flag, as a server loads it"
            served = functools.partial(_as_a_server_loads_it, rejecting)
            results.append(run_check(NAME, name, served))
        results.append(run_check(NAME, EVIDENCE_CHECK, _evidence))
    return results
