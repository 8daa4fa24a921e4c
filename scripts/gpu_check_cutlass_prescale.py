"""GPU check: FlashInfer's CUTLASS fused MoE with the router-weight pre-scale (top-1, bf16).

Runs the real ``flashinfer.fused_moe.cutlass_fused_moe`` on random bf16 SwiGLU experts with
the input pre-scaled by ``prescale_router_weight_on_input`` and float32 unit final scales,
and compares it with the CPU contract reference of the Llama 4 semantics ``expert(x * w)``
(``reference/cutlass_moe_contract.py``). For contrast it also reports the unpatched call
(router weight passed as ``token_final_scales``), which computes ``w * expert(x)``. Then it
times the pre-scale against the kernel with CUDA events (medians).

``fc1`` is laid out ``[up; gate]`` (FlashInfer's ``w31``): the kernel's gated activation
reads the gate from the second half of the GEMM1 output row
(``doActivationKernel``/``doGatedActivationKernel`` in FlashInfer 0.7.2's
``data/csrc/fused_moe/cutlass_backend/cutlass_fused_moe_kernels.cuh``).

bf16 runs on SM90 (H100/H200) and newer. Without FlashInfer's prebuilt kernels the first
call JIT-compiles the CUTLASS MoE module, which can take several minutes. Exit status: 0 on
success or when there is no CUDA device, 1 on a mismatch beyond bf16 tolerance, 2 when
FlashInfer cannot run here.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable

import torch

from sglang_nvfp4_patches.llama4_router_weight.prescale import prescale_router_weight_on_input
from sglang_nvfp4_patches.reference.cutlass_moe_contract import cutlass_fused_moe_reference

# bf16 inputs, weights and the bf16 intermediate activation between the GEMMs: a few bf16
# unit roundoffs (2**-9) of Frobenius relative error; FlashInfer's own bf16 test allows 1e-2
# elementwise.
REL_TOLERANCE = 1e-2


def rel_err(actual: torch.Tensor, expected: torch.Tensor) -> float:
    """Frobenius relative error in float64 (on CPU)."""
    diff = actual.double().cpu() - expected.double().cpu()
    return float(diff.norm() / expected.double().cpu().norm().clamp_min(1e-30))


def cuda_median_ms(fn: Callable[[], object], reps: int) -> float:
    """Median milliseconds of ``fn`` over ``reps`` CUDA-event-timed calls (after warm-up)."""
    for _ in range(3):
        fn()
    times = []
    for _ in range(reps):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def check_one(
    cutlass_fused_moe: Callable[..., object],
    tokens: int,
    args: argparse.Namespace,
    generator: torch.Generator,
    device: torch.device,
    median_ms: Callable[[Callable[[], object], int], float] = cuda_median_ms,
) -> tuple[bool, str]:
    """Run one token count; returns (passed, Markdown table row).

    ``device`` and ``median_ms`` are parameters only so the logic can be dry-run on CPU
    with a stand-in kernel."""
    hidden, inter, experts = args.hidden, args.inter, args.experts
    x_cpu = torch.randn(tokens, hidden, generator=generator).to(torch.bfloat16)
    w_cpu = torch.sigmoid(torch.randn(tokens, 1, generator=generator))  # float32, as SGLang
    ids_cpu = torch.randint(0, experts, (tokens, 1), generator=generator, dtype=torch.int32)
    fc1_cpu = (torch.randn(experts, 2 * inter, hidden, generator=generator) / hidden**0.5).to(
        torch.bfloat16
    )
    fc2_cpu = (torch.randn(experts, hidden, inter, generator=generator) / inter**0.5).to(
        torch.bfloat16
    )
    x, w, ids = x_cpu.to(device), w_cpu.to(device), ids_cpu.to(device)
    fc1, fc2 = fc1_cpu.to(device), fc2_cpu.to(device)

    def patched(out: torch.Tensor) -> torch.Tensor:
        scaled, unit_scales = prescale_router_weight_on_input(x, w)
        cutlass_fused_moe(
            scaled, ids, unit_scales, fc1, fc2, torch.bfloat16, quant_scales=None, output=out
        )
        return out

    out = patched(torch.empty(tokens, hidden, dtype=torch.bfloat16, device=device))
    unpatched = torch.empty_like(out)
    cutlass_fused_moe(x, ids, w, fc1, fc2, torch.bfloat16, quant_scales=None, output=unpatched)

    # Llama 4 semantics on CPU: x * w in the model dtype, then the expert, float32 math.
    weighted = x_cpu * w_cpu.to(torch.bfloat16)
    expected = cutlass_fused_moe_reference(
        weighted, ids_cpu, torch.ones(tokens, 1), fc1_cpu, fc2_cpu, torch.float32
    )
    patched_err, unpatched_err = rel_err(out, expected), rel_err(unpatched, expected)
    passed = patched_err <= REL_TOLERANCE

    scaled, unit_scales = prescale_router_weight_on_input(x, w)
    kernel_out = torch.empty_like(out)
    prescale_ms = median_ms(lambda: prescale_router_weight_on_input(x, w), args.reps)
    kernel_ms = median_ms(
        lambda: cutlass_fused_moe(
            scaled,
            ids,
            unit_scales,
            fc1,
            fc2,
            torch.bfloat16,
            quant_scales=None,
            output=kernel_out,
        ),
        args.reps,
    )
    row = (
        f"| {tokens} | {patched_err:.2e} | {unpatched_err:.2e} | {'ok' if passed else 'FAIL'} "
        f"| {prescale_ms * 1e3:.1f} | {kernel_ms * 1e3:.1f} | {prescale_ms / kernel_ms:.3f} |"
    )
    return passed, row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", default="1,7,64,512", help="comma-separated token counts")
    parser.add_argument("--hidden", type=int, default=5120)
    parser.add_argument("--inter", type=int, default=1024, help="expert intermediate size")
    parser.add_argument("--experts", type=int, default=16)
    parser.add_argument("--reps", type=int, default=50, help="timed repetitions")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    if not torch.cuda.is_available():
        print("no CUDA device: skipping the FlashInfer CUTLASS fused-MoE pre-scale check.")
        return 0
    try:
        import flashinfer
        from flashinfer.fused_moe import cutlass_fused_moe
    except Exception as error:  # an import failure of any kind means: cannot run here
        print(f"FlashInfer is not usable here ({type(error).__name__}: {error}).")
        return 2

    major, minor = torch.cuda.get_device_capability()
    print(
        f"device: {torch.cuda.get_device_name()} (SM{major}{minor}); torch {torch.__version__}; "
        f"flashinfer {getattr(flashinfer, '__version__', '?')}"
    )
    print(
        f"hidden {args.hidden}, intermediate {args.inter}, {args.experts} experts, top-1, bf16; "
        f"tolerance: relative error <= {REL_TOLERANCE}"
    )
    print("(the first call may JIT-compile FlashInfer's CUTLASS MoE module)")
    print(
        "| tokens | patched rel err | unpatched rel err | verdict | prescale [us] "
        "| kernel [us] | prescale / kernel |"
    )
    print("|---:|---:|---:|:---|---:|---:|---:|")
    generator = torch.Generator().manual_seed(args.seed)
    all_passed = True
    for tokens in (int(t) for t in args.tokens.split(",")):
        try:
            passed, row = check_one(
                cutlass_fused_moe, tokens, args, generator, torch.device("cuda")
            )
        except Exception as error:  # kernel unavailable for this device/build
            print(f"FlashInfer CUTLASS fused MoE failed to run: {type(error).__name__}: {error}")
            return 2
        print(row, flush=True)
        all_passed = all_passed and passed
    print("PASS" if all_passed else "FAIL: patched output differs from expert(x * w)")
    return 0 if all_passed else 1


if __name__ == "__main__":
    sys.exit(main())
