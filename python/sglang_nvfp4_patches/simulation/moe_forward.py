"""One forward through a checkpoint's first MoE layer on a simulated GPU, on CPU, the way a
server runs it: SGLang's own resolution, ``FusedMoE`` (built as the model builds it,
:mod:`.moe_models`, at small sizes), weight loader and quantization method; only kernels are
stood in for (FlashInfer's CUTLASS MoE by its CPU reference, the rest by
:mod:`.uncomputed_kernels`). The weights are random FP4 codes with every scale one, so the
output is compared exactly with what the layer means (:mod:`..reference.moe_meaning`).
"""

from __future__ import annotations

import contextlib
import enum
import importlib
import inspect
import json
import os
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sglang_nvfp4_patches.simulation.gpus import GpuProfile
from sglang_nvfp4_patches.simulation.moe_models import MoeModel, moe_model
from sglang_nvfp4_patches.simulation.patching import rebound_in_sglang

HIDDEN, INTERMEDIATE, TOKENS = 128, 128, 5
BLACKWELL_MAJOR = 10
# The layer is simulated on one GPU: a launch across several is not run.
PARALLEL_SIZES = ("tp_size", "dp_size", "ep_size", "pp_size")
# Each simulated layer has 2*top-k experts of HIDDEN x INTERMEDIATE: kept to a few MB.
MAX_SIMULATED_TOP_K = 256
TOLERANCE = 2e-2  # bfloat16 output against the float32 meaning
FUSED_MOE_MODULE = "sglang.srt.layers.moe.fused_moe_triton"


class LayerVerdict(str, enum.Enum):
    """What one forward through the layer showed."""

    SERVES = "serves"  # the output is what the layer means
    WRONG = "wrong"  # computed, but not what the layer means
    FAILS = "fails"  # SGLang's own code raised: at build, weight loading/processing or forward
    NO_KERNEL = "no kernel"  # reached a kernel that has none for this GPU
    REFUSED = "refused"  # this plugin refused the layer when it was built
    OTHER_KERNEL = "other kernel"  # reached a kernel the simulation does not compute
    NOT_SIMULATED = "not simulated"  # a GPU-only library call the CPU cannot stand in for


# Verdicts that mean the server fails, or serves wrong answers, with this layer.
BROKEN = frozenset({LayerVerdict.WRONG, LayerVerdict.FAILS, LayerVerdict.NO_KERNEL})
# Verdicts where the CPU cannot tell whether it serves.
UNKNOWN = frozenset({LayerVerdict.OTHER_KERNEL, LayerVerdict.NOT_SIMULATED})


@dataclass(frozen=True)
class LayerRun:
    """The first MoE layer of one checkpoint on one simulated GPU."""

    family: str
    runner: str | None  # the MoE runner backend the layer built (None: it built none)
    verdict: LayerVerdict
    detail: str  # the error, the refusal, the kernel reached, or the output's error

    @property
    def broken(self) -> bool:
        return self.verdict in BROKEN

    def as_json(self) -> dict[str, str | None]:
        return {**asdict(self), "verdict": self.verdict.value}


class _Stage(str, enum.Enum):
    BUILD = "when it is built"
    LOAD = "when its weights load"
    PROCESS = "when its weights are processed"
    FORWARD = "at the first forward"

    def done(self, runner: str | None) -> str:
        """What the layer got through before this stage (for an unknown fate)."""
        built = f"built on the {runner} runner" if runner else "built"
        return {
            _Stage.BUILD: "not built",
            _Stage.LOAD: built,
            _Stage.PROCESS: f"{built}, its weights loaded",
            _Stage.FORWARD: f"{built}, its weights loaded and processed",
        }[self]


# Before SGLang's runtime context (0.5.15), layers asked these process-group functions.
PLACEMENT_OWNER = "sglang.srt.distributed"
PLACEMENT = {
    "get_moe_expert_parallel_world_size": 1,
    "get_moe_expert_parallel_rank": 0,
    "get_moe_tensor_parallel_world_size": 1,
    "get_moe_tensor_parallel_rank": 0,
}


@contextlib.contextmanager
def single_gpu_placement() -> Iterator[None]:
    """Rank 0 of 1 for MoE EP and TP, through SGLang's override seam, else its functions."""
    try:
        from sglang.srt.runtime_context import get_parallel

        override = get_parallel().override(
            moe_ep_size=1, moe_ep_rank=0, moe_tp_size=1, moe_tp_rank=0
        )
    except (ImportError, AttributeError, ValueError):
        override = None
    if override is not None:
        with override:
            yield
        return
    fakes = {name: (lambda *_a, _v=value, **_k: _v) for name, value in PLACEMENT.items()}
    with rebound_in_sglang(PLACEMENT_OWNER, fakes):
        yield


def checkpoint_quant_config(server_args: Any) -> Any:
    """The quantization config SGLang's ``ModelConfig`` reads off the checkpoint (``None``: not
    quantized); the record's memoized ``ModelConfig`` where SGLang has one."""
    from sglang_nvfp4_patches.server_args_seam.launch import quant_config_of

    try:
        from sglang.srt.arg_groups.model_override_base import model_config_of
    except ImportError:
        from sglang.srt.configs.model_config import ModelConfig

        return quant_config_of(ModelConfig.from_server_args(server_args))
    return quant_config_of(model_config_of(server_args))


def layer_experts(model: MoeModel, ep_size: int = 1) -> int:
    """The simulated layer's experts: 2*top-k, at least 4, split evenly over ``ep_size``."""
    return -(-max(4, 2 * model.top_k) // ep_size) * ep_size


def build_layer(model: MoeModel, quant_config: Any, experts: int) -> Any:
    """SGLang's ``FusedMoE`` as the model builds it (arguments this release's constructor
    does not take are left out)."""
    import torch

    fused_moe = importlib.import_module(FUSED_MOE_MODULE).FusedMoE
    args: dict[str, Any] = {
        "num_experts": experts,
        "hidden_size": HIDDEN,
        "intermediate_size": INTERMEDIATE,
        "layer_id": model.index,
        "params_dtype": torch.bfloat16,
        "quant_config": quant_config,
        "prefix": model.prefix,
        **model.fused_moe_args,
    }
    routing = args.pop("routing_method_type", None)
    if routing is not None:
        from sglang.srt.layers.moe.utils import RoutingMethodType

        if hasattr(RoutingMethodType, routing):
            args["routing_method_type"] = getattr(RoutingMethodType, routing)
    accepted = inspect.signature(fused_moe.__init__).parameters
    return fused_moe(**{name: value for name, value in args.items() if name in accepted})


@dataclass(frozen=True)
class ExpertWeights:
    """Float expert weights on the FP4 grid, as the reference reads them, and their codes."""

    w13: Any  # [experts, 2*I, H]: [up; gate], FlashInfer's w31 order
    w2: Any  # [experts, H, I]
    packed: dict[str, Any]  # shard (w1 gate, w3 up, w2) -> [experts, rows, cols // 2] bytes


def expert_weights(experts: int, seed: int = 0) -> ExpertWeights:
    import torch

    from sglang_nvfp4_patches.simulation.cutlass_kernel import random_fp4

    generator = torch.Generator().manual_seed(seed)
    gate, gate_packed = random_fp4((experts, INTERMEDIATE, HIDDEN), generator)
    up, up_packed = random_fp4((experts, INTERMEDIATE, HIDDEN), generator)
    down, down_packed = random_fp4((experts, HIDDEN, INTERMEDIATE), generator)
    return ExpertWeights(
        torch.cat([up, gate], dim=1), down, {"w1": gate_packed, "w3": up_packed, "w2": down_packed}
    )


def _checkpoint_tensor(suffix: str, shard: str, expert: int, weights: ExpertWeights) -> Any:
    """The checkpoint's tensor of one shard of one expert for a parameter ``w13_<suffix>`` or
    ``w2_<suffix>`` (ModelOpt and compressed-tensors NVFP4 names)."""
    import torch

    from sglang_nvfp4_patches.simulation.cutlass_kernel import E4M3_ONE

    packed = weights.packed[shard][expert]
    if suffix in ("weight", "weight_packed"):
        return packed.clone()
    if suffix == "weight_scale":  # one E4M3 1.0 per block of 16 weights
        rows, half_cols = packed.shape
        ones = torch.full((rows, half_cols * 2 // 16), E4M3_ONE, dtype=torch.uint8)
        return ones.view(torch.float8_e4m3fn)
    return torch.tensor(1.0)  # global, second-level and input scales


def load_weights(layer: Any, model: MoeModel, weights: ExpertWeights) -> None:
    """Every loadable parameter, one shard of one expert at a time, through its own weight
    loader, as SGLang's model loader calls it."""
    experts = weights.w13.shape[0]
    for name, param in list(layer.named_parameters()):
        loader = getattr(param, "weight_loader", None)
        projection, _, suffix = name.partition("_")
        if loader is None or projection not in ("w13", "w2"):
            continue
        shards = ("w1", "w3") if projection == "w13" else ("w2",)
        for expert in range(experts):
            for shard in shards:
                tensor = _checkpoint_tensor(suffix, shard, expert, weights)
                loader(param, tensor, f"{model.prefix}.{name}", shard_id=shard, expert_id=expert)


def nvfp4_weights(layer: Any) -> str | None:
    """``None`` where the layer's expert weights are NVFP4 (FP4 codes two to a byte), the
    format the simulation loads; else what they are, as the checkpoint's quantization made
    them (its FP8, BF16, ... layer cannot take NVFP4 codes)."""
    import torch

    for name, param in layer.named_parameters():
        if name in ("w13_weight", "w13_weight_packed"):
            if param.dtype == torch.uint8 and param.shape[-1] == HIDDEN // 2:
                return None
            method = type(getattr(layer, "scheme", None) or layer.quant_method).__name__
            return f"{str(param.dtype).removeprefix('torch.')} expert weights ({method})"
    return "no expert weights it can load"


def layer_runner(layer: Any) -> str | None:
    """The runner the compressed-tensors scheme, else the quantization method, holds."""
    holder = getattr(layer, "scheme", None) or layer.quant_method
    backend = getattr(getattr(holder, "runner", None), "runner_backend", None)
    if backend is None:
        backend = getattr(holder, "_moe_runner_backend", None)
    return None if backend is None else str(getattr(backend, "value", backend))


def forward(layer: Any, x: Any, weights: Any, ids: Any, x_scale: Any = None) -> Any:
    """``FusedMoE``'s forward through its quantization method, after standard dispatch
    (``x_scale``: of activations quantized before it)."""
    from sglang.srt.layers.moe.token_dispatcher.standard import StandardDispatchOutput
    from sglang.srt.layers.moe.topk import StandardTopKOutput

    topk = StandardTopKOutput(topk_weights=weights, topk_ids=ids, router_logits=None)
    dispatch = StandardDispatchOutput(
        hidden_states=x, hidden_states_scale=x_scale, topk_output=topk
    )
    return layer.quant_method.apply(layer, dispatch).hidden_states


_PACKAGE = f"{os.sep}sglang_nvfp4_patches{os.sep}"
# Code that needs a GPU: kernel libraries, torch's CUDA runtime and its custom-op dispatch.
_GPU_ONLY = (
    f"{os.sep}flashinfer{os.sep}",
    f"{os.sep}sgl_kernel{os.sep}",
    f"{os.sep}torch{os.sep}cuda{os.sep}",
    f"{os.sep}torch{os.sep}_ops.py",
)


def _raised_by(error: BaseException) -> str:
    """``gpu only`` where ``error`` passed through GPU-only code, else whose innermost frame
    raised it: ``plugin``, ``sglang`` or ``other``."""
    frames = traceback.extract_tb(error.__traceback__)
    if any(part in frame.filename for frame in frames for part in _GPU_ONLY):
        return "gpu only"
    for frame in reversed(frames):
        if _PACKAGE in frame.filename:
            return "plugin"
        if f"{os.sep}sglang{os.sep}" in frame.filename:
            return "sglang"
    return "other"


def _verdict_of(
    error: Exception, stage: _Stage, gpu: GpuProfile, runner: str | None
) -> tuple[LayerVerdict, str]:
    """What ``error``, raised at ``stage`` by a layer built on ``runner``, says of it: a
    runner whose kernels the GPU lacks fails wherever the CPU stopped short of them."""
    from sglang_nvfp4_patches.simulation.uncomputed_kernels import (
        TRTLLM_KERNEL,
        TRTLLM_RUNNER,
        KernelReached,
        trtllm_gen_moe_kernels,
    )

    if isinstance(error, KernelReached):
        if error.has_kernels is False:
            return LayerVerdict.NO_KERNEL, f"{error.kernel} has no kernels for {gpu.label}"
        reached = f"{stage.done(runner)}; it reaches {error.kernel}, not computed on CPU"
        return LayerVerdict.OTHER_KERNEL, reached
    message = f"{type(error).__name__}: {error}".strip()
    if type(error).__module__.startswith(__package__.rpartition(".")[0]):
        return LayerVerdict.REFUSED, f"{stage.value}: {error}"  # one of this plugin's refusals
    whose = _raised_by(error)
    if whose == "sglang":
        return LayerVerdict.FAILS, f"{stage.value}: {message}"
    if whose != "gpu only":
        raise error  # the simulation's own failure: a bug, never a verdict on SGLang
    if runner == TRTLLM_RUNNER and trtllm_gen_moe_kernels(gpu) is False:
        return LayerVerdict.NO_KERNEL, f"{TRTLLM_KERNEL} has no kernels for {gpu.label}"
    call = f"{stage.done(runner)}; {stage.value} it calls GPU-only code ({message})"
    return LayerVerdict.NOT_SIMULATED, f"{call}, which the CPU does not run"


@dataclass(frozen=True)
class LayerForward:
    """What :func:`forward_through` got: the runner, what stopped the layer (``failure``), or
    its output with the inputs and weights it was given."""

    runner: str | None
    failure: tuple[LayerVerdict, str] | None = None
    out: Any = None
    inputs: tuple[Any, ...] = ()  # hidden states, router weights, expert ids
    weights: ExpertWeights | None = None


def forward_through(
    model: MoeModel,
    quant_config: Any,
    experts: int,
    gpu: GpuProfile,
    run: Callable[..., Any] = forward,
    after_build: Callable[[Any], None] | None = None,
) -> LayerForward:
    """Build, load, process and run (``run(layer, x, router_weights, ids)``) the layer, as the
    model loader and the model do; a failure is classified (the simulation's own re-raised)."""
    import torch

    from sglang_nvfp4_patches.simulation.cutlass_kernel import random_batch

    stage, layer = _Stage.BUILD, None
    try:
        layer = build_layer(model, quant_config, experts)
        if after_build is not None:
            after_build(layer)
        other_format = nvfp4_weights(layer)
        if other_format is not None:
            detail = f"built with {other_format}: the CPU simulation loads NVFP4 weights only"
            return LayerForward(layer_runner(layer), (LayerVerdict.NOT_SIMULATED, detail))
        weights = expert_weights(experts)
        stage = _Stage.LOAD
        load_weights(layer, model, weights)
        stage = _Stage.PROCESS
        layer.quant_method.process_weights_after_loading(layer)  # as the loader calls it
        stage = _Stage.FORWARD
        inputs = random_batch(TOKENS, HIDDEN, experts, model.top_k, torch.bfloat16, seed=1)
        out = run(layer, *inputs)
    except Exception as error:  # classified: SGLang's, a kernel's, or re-raised as ours
        runner = layer_runner(layer) if layer is not None else None
        return LayerForward(runner, _verdict_of(error, stage, gpu, runner))
    return LayerForward(layer_runner(layer), None, out, inputs, weights)


def not_simulated(model: MoeModel, gpu: GpuProfile) -> str | None:
    """Why the CPU simulation does not run this layer as its model builds it (``None``: it
    does): before Blackwell, SGLang's Marlin fallback needs CUDA itself; an activation without
    a gate (Nemotron-H's relu2) is not built; top-k is kept small."""
    if gpu.major < BLACKWELL_MAJOR:
        return f"{gpu.label}: SGLang's Marlin fallback needs CUDA itself"
    if model.gate_activation is None:
        activation = model.fused_moe_args.get("activation")
        return f"its experts use {activation}, a layer the CPU simulation does not build"
    if model.top_k > MAX_SIMULATED_TOP_K:
        return (
            f"top-{model.top_k}: the CPU simulation builds layers up to top-{MAX_SIMULATED_TOP_K}"
        )
    return None


def run_first_moe_layer(
    model_dir: Path,
    gpu: GpuProfile,
    flags: Mapping[str, Any] | None = None,
    after_build: Callable[[Any], None] | None = None,
) -> LayerRun | None:
    """Build, load, process and run the checkpoint's first MoE layer on ``gpu`` with the
    user's ``flags`` (``None``: no MoE layer, not quantized, several GPUs, or pre-Blackwell,
    where SGLang's Marlin fallback needs CUDA itself); ``after_build`` gets the layer built."""
    from sglang_nvfp4_patches.simulation.cutlass_kernel import (
        cpu_cutlass_kernel,
        cuda_moves_stay_on_cpu,
    )
    from sglang_nvfp4_patches.simulation.scheduler import moe_layer_build_on, single_rank_tp_group
    from sglang_nvfp4_patches.simulation.server_args import quiet_sglang
    from sglang_nvfp4_patches.simulation.uncomputed_kernels import uncomputed_kernels

    model = moe_model(json.loads((model_dir / "config.json").read_text()))
    flags = dict(flags or {})
    several = any(int(flags.get(size) or 1) > 1 for size in PARALLEL_SIZES)
    if model is None or gpu.major < BLACKWELL_MAJOR or several:
        return None
    with (
        quiet_sglang(),
        moe_layer_build_on(gpu.name, model_dir, **flags) as server_args,
        single_rank_tp_group(),
        single_gpu_placement(),
        cpu_cutlass_kernel(),
        uncomputed_kernels(gpu),
        cuda_moves_stay_on_cpu(),
    ):
        config = checkpoint_quant_config(server_args)
        if config is None:
            return None
        reason = not_simulated(model, gpu)
        if reason is not None:
            return LayerRun(model.family, None, LayerVerdict.NOT_SIMULATED, reason)
        run = forward_through(model, config, layer_experts(model), gpu, after_build=after_build)
    if run.failure is not None:
        return LayerRun(model.family, run.runner, *run.failure)
    verdict, detail, error = against_meaning(model, run)
    if error is not None:
        detail = f"{detail} (relative error {error:.1e})"
    return LayerRun(model.family, run.runner, verdict, detail)


def against_meaning(model: MoeModel, run: LayerForward) -> tuple[LayerVerdict, str, float | None]:
    """The layer's output against what it means (:mod:`..reference.moe_meaning`): the verdict,
    what it says, and the relative error."""
    from sglang_nvfp4_patches.reference.moe_meaning import moe_meaning

    assert run.weights is not None  # a layer that ran
    x, router_weights, ids = run.inputs
    # a layer without a gate activation is not simulated (not_simulated)
    expected = moe_meaning(
        x,
        router_weights,
        ids,
        run.weights.w13,
        run.weights.w2,
        model.router_weight_on_input,
        str(model.gate_activation),
    )
    error = float((run.out.float() - expected).abs().max() / expected.abs().max().clamp_min(1e-6))
    meaning = "expert(x*w)" if model.router_weight_on_input else "sum_k w_k*expert_k(x)"
    verdict = LayerVerdict.SERVES if error <= TOLERANCE else LayerVerdict.WRONG
    return verdict, f"output {'=' if verdict is LayerVerdict.SERVES else '!='} {meaning}", error
