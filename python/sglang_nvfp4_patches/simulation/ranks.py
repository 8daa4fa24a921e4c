"""A checkpoint's first MoE layer across 2 or 4 real processes on CPU, one rank each, as a
server's schedulers run it: each loads the plugins, resolves and publishes the ServerArgs on the
simulated GPU, has SGLang build its process groups (``gloo``; PyNCCL off, as without a GPU),
runs the layer (:mod:`.moe_forward`) and SGLang's tensor-parallel all-reduce, and compares the
result with what the layer means. SGLang refuses a ``FusedMoE`` of several ranks in one
process: hence the processes. They are ``spawn``-ed (the caller's main module must guard its
start with ``if __name__ == "__main__"``); their output is discarded, their temporary files and
shared memory removed, and none outlives the run (the deadline, a stop request, or a rank
ending outside the collectives terminates the others).
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import queue
import shutil
import socket
import tempfile
import threading
import time
import traceback
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from sglang_nvfp4_patches.interrupts import stop_requests_as_interrupt
from sglang_nvfp4_patches.simulation.gpus import GPU_PROFILES, GpuProfile
from sglang_nvfp4_patches.simulation.moe_forward import LayerVerdict, not_simulated
from sglang_nvfp4_patches.simulation.moe_models import moe_model

# ServerArgs fields of each layout (``ep_size`` equal to ``tp_size``: SGLang's expert parallel).
LAYOUTS: dict[str, dict[str, int]] = {
    "tp2": {"tp_size": 2},
    "tp4": {"tp_size": 4},
    "ep2": {"tp_size": 2, "ep_size": 2},
    "ep4": {"tp_size": 4, "ep_size": 4},
    "pp2": {"pp_size": 2},
}
# SGLang loads PyNCCL from this path where it is set; a library that does not exist turns
# PyNCCL off, as SGLang does in a non-GPU environment.
NCCL_SO_PATH_ENV = "SGLANG_NCCL_SO_PATH"
NO_NCCL = "/nonexistent/sglang-nvfp4-patches/libnccl.so"
GRACE_S = 5.0  # for a rank's result already sent, and for a child to end when asked
SGLANG_SHM_PATTERN = "sgl_shm_*"
EXIT_S = 60.0  # for a rank that reported to end by itself (SGLang's clean-up at exit)
POLL_S = 0.5

KernelRanks = tuple[int, int, int, int]  # ep_size, ep_rank, tp_size, tp_rank


@dataclass(frozen=True)
class RanksRun:
    """What one layout of ranks showed for the checkpoint's first MoE layer."""

    layout: str
    world: int  # processes (ranks) run
    verdict: LayerVerdict
    detail: str  # the output's worst error over the ranks, the failure, or why not simulated
    runner: str | None = None  # the MoE runner backend rank 0's layer built
    # Per rank that reached FlashInfer's CUTLASS kernel, in rank order: the rank arguments
    # SGLang passed it (ep_size, ep_rank, tp_size, tp_rank).
    kernel_ranks: tuple[KernelRanks, ...] = ()


@dataclass(frozen=True)
class _RankOutcome:
    """One rank's report to the parent (picklable)."""

    rank: int
    # None: this rank's part went through, another rank's did not (its verdict answers).
    verdict: LayerVerdict | None
    detail: str
    error: float | None = None  # the combined output's relative error
    runner: str | None = None
    kernel_ranks: KernelRanks | None = None
    # Ended before or outside the ranks' collectives: the other ranks may wait for it forever.
    alone: bool = False
    bug: str | None = None  # the simulation's own failure (a traceback): raised, no verdict


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def run_across_ranks(
    model_dir: Path,
    gpu: str,
    layout: str,
    flags: Mapping[str, Any] | None = None,
    timeout_s: float = 240,
) -> RanksRun:
    """Run ``model_dir``'s first MoE layer on ``gpu`` (a :data:`.gpus.GPU_PROFILES` name)
    across the ranks of ``layout`` (a :data:`LAYOUTS` name), ``flags`` further ServerArgs
    fields; the processes are ended within ``timeout_s`` seconds, or at a stop request."""
    profile = GPU_PROFILES[gpu]
    fields = {**LAYOUTS[layout], **(flags or {})}
    world = int(fields.get("tp_size") or 1) * int(fields.get("pp_size") or 1)  # SGLang's WORLD
    model = moe_model(json.loads((model_dir / "config.json").read_text()))
    why_not = (
        "its config builds no MoE layer" if model is None else not_simulated(model, profile)
    ) or _no_parallel_state()
    if why_not is not None:
        return RanksRun(layout, world, LayerVerdict.NOT_SIMULATED, why_not)
    outcomes, ended = _ranks_run(model_dir, profile, fields, world, timeout_s)
    return _combined(layout, world, outcomes, ended)


def _no_parallel_state() -> str | None:
    """Why this SGLang's parallel state cannot be built on CPU here (asked before any rank
    starts, and by each rank), else ``None``."""
    try:
        from sglang.srt.distributed.bootstrap import _init_parallel_groups  # noqa: F401
        from sglang.srt.runtime_context import SpawnRanks  # noqa: F401
    except ImportError as error:
        return f"SGLang's parallel state cannot be built on CPU in this release ({error})"
    return None


def _ranks_run(
    model_dir: Path, profile: GpuProfile, fields: dict[str, Any], world: int, timeout_s: float
) -> tuple[dict[int, _RankOutcome], str | None]:
    """Every rank's outcome, and why the run ended early (``None``: every rank reported)."""
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    port = _free_port()
    # The children's temporary files go here (a child ended early leaves its own behind).
    scratch = tempfile.mkdtemp(prefix="nvfp4-ranks-")
    outcomes: dict[int, _RankOutcome] = {}
    children = [
        context.Process(
            target=_rank_main,
            args=(rank, world, port, str(model_dir), profile.name, fields, results, scratch),
            name=f"nvfp4-moe-rank-{rank}",
            daemon=True,
        )
        for rank in range(world)
    ]
    try:
        with stop_requests_as_interrupt():  # SIGTERM as Ctrl-C: the children end below
            for child in children:
                child.start()
            ended = _collected(results, children, outcomes, timeout_s)
    finally:
        _ended(children, every_rank_reported=len(outcomes) == world)
        results.close()
        results.join_thread()
        shutil.rmtree(scratch, ignore_errors=True)
        _shared_memory_unlinked({child.pid for child in children if child.pid is not None})
    return outcomes, ended


def _collected(
    results: Any, children: list[Any], outcomes: dict[int, _RankOutcome], timeout_s: float
) -> str | None:
    """Fill ``outcomes`` until every rank has reported, or one that ends outside the
    collectives has (``None``), or not within ``timeout_s`` (why not)."""
    deadline = time.monotonic() + timeout_s
    while len(outcomes) < len(children):
        left = deadline - time.monotonic()
        if left <= 0:
            return f"the ranks did not finish within {timeout_s:g} s"
        try:
            outcome: _RankOutcome = results.get(timeout=min(left, POLL_S))
        except queue.Empty:
            gone = [
                r for r, c in enumerate(children) if r not in outcomes and c.exitcode is not None
            ]
            if not gone:
                continue
            with contextlib.suppress(queue.Empty):  # a result sent just before it ended
                while True:
                    late: _RankOutcome = results.get(timeout=GRACE_S)
                    outcomes[late.rank] = late
            gone = [r for r in gone if r not in outcomes]
            if gone:
                return f"rank {gone[0]} ended (exit code {children[gone[0]].exitcode}) unreported"
            continue
        outcomes[outcome.rank] = outcome
        if outcome.alone or outcome.bug is not None:
            return None  # the others may wait for it in a collective
    return None


def _ended(children: list[Any], every_rank_reported: bool) -> None:
    """Every child ended and reaped: where every rank reported, each is given time to end by
    itself (its clean-up at exit); the others are terminated, then killed."""
    if every_rank_reported:
        for child in children:
            child.join(timeout=EXIT_S)
    for child in children:
        if child.is_alive():
            child.terminate()
    for child in children:
        if child.pid is None:
            continue  # never started
        child.join(timeout=GRACE_S)
        if child.is_alive():
            child.kill()
            child.join()


def _shared_memory_unlinked(pids: set[int]) -> None:
    """The shared memory a terminated rank left: SGLang stamps each segment it creates with
    the creator's pid (``sgl_shm_<kind>_<pid>_<id>``)."""
    from multiprocessing import shared_memory

    shm = Path("/dev/shm")
    if not pids or not shm.is_dir():
        return
    for entry in shm.glob(SGLANG_SHM_PATTERN):
        parts = entry.name.split("_")
        if len(parts) >= 4 and parts[-2].isdigit() and int(parts[-2]) in pids:
            with contextlib.suppress(OSError):
                segment = shared_memory.SharedMemory(name=entry.name)
                segment.close()
                segment.unlink()  # unregistered from the resource tracker too


def _combined(
    layout: str, world: int, outcomes: dict[int, _RankOutcome], ended: str | None
) -> RanksRun:
    """One verdict for the ranks: the first rank's failure, else (every rank reported) the
    worst rank's output; why not simulated otherwise."""
    ordered = [outcomes[rank] for rank in sorted(outcomes)]
    bug = next((o for o in ordered if o.bug is not None), None)
    if bug is not None:
        raise RuntimeError(f"the CPU simulation failed on rank {bug.rank}:\n{bug.bug}")
    run = RanksRun(
        layout,
        world,
        LayerVerdict.NOT_SIMULATED,
        ended or "a rank did not report",
        runner=outcomes[0].runner if 0 in outcomes else None,
        kernel_ranks=tuple(o.kernel_ranks for o in ordered if o.kernel_ranks is not None),
    )
    computed = (None, LayerVerdict.SERVES, LayerVerdict.WRONG)
    failed = next((o for o in ordered if o.verdict not in computed), None)
    if failed is not None:
        every = all((o.verdict, o.detail) == (failed.verdict, failed.detail) for o in ordered)
        detail = failed.detail if every else f"on rank {failed.rank}, {failed.detail}"
        return replace(run, verdict=failed.verdict, detail=detail)
    if ended is not None or len(ordered) < world:
        return run
    worst = max(ordered, key=lambda o: o.error or 0.0)
    where = "every rank" if worst.verdict is LayerVerdict.SERVES else f"rank {worst.rank}"
    detail = f"{worst.detail} on {where} (relative error {worst.error:.1e})"
    return replace(run, verdict=worst.verdict, detail=detail)


# --- in each child -------------------------------------------------------------------------


def _rank_main(
    rank: int,
    world: int,
    port: int,
    model_dir: str,
    gpu: str,
    fields: dict[str, Any],
    results: Any,
    scratch: str,
) -> None:
    """One rank's process: its outcome on ``results``; its output is none of the parent's,
    its temporary files are under ``scratch``."""
    os.environ[NCCL_SO_PATH_ENV] = NO_NCCL  # before SGLang is imported
    os.environ["TMPDIR"] = tempfile.tempdir = scratch
    devnull = os.open(os.devnull, os.O_WRONLY)  # SGLang's banners and warnings go nowhere
    for fd in (1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)
    _ends_with_parent()
    try:
        outcome = _rank_outcome(rank, world, port, Path(model_dir), GPU_PROFILES[gpu], fields)
    except BaseException:  # the simulation's own failure: the parent raises it
        outcome = _RankOutcome(rank, None, "", alone=True, bug=traceback.format_exc())
    results.put(outcome)


def _ends_with_parent() -> None:
    """A rank left waiting in a collective ends when its parent is gone (no orphans)."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _rank_outcome(
    rank: int, world: int, port: int, model_dir: Path, profile: GpuProfile, fields: dict[str, Any]
) -> _RankOutcome:
    from sglang.srt.plugins import load_plugins

    from sglang_nvfp4_patches.simulation.gpus import device_capability, simulated_gpu
    from sglang_nvfp4_patches.simulation.server_args import (
        _reason,
        quiet_sglang,
        resolved_server_args,
    )

    load_plugins()  # as SGLang's scheduler process does first
    why = _no_parallel_state()
    if why is not None:
        return _RankOutcome(rank, LayerVerdict.NOT_SIMULATED, why, alone=True)
    from sglang.srt.distributed.bootstrap import _init_parallel_groups
    from sglang.srt.runtime_context import SpawnRanks, get_parallel, publish

    with quiet_sglang(), device_capability(profile), simulated_gpu(profile):
        try:
            server_args = resolved_server_args(model_dir, **fields)
        except (ValueError, AssertionError) as error:  # SGLang's validation, or a patch's
            ours = type(error).__module__.startswith(__package__.rpartition(".")[0])
            if ours:
                refusal = f"this plugin refuses it: {error}"
                return _RankOutcome(rank, LayerVerdict.REFUSED, refusal, alone=True)
            refusal = f"SGLang refuses it: {_reason(error)}"
            return _RankOutcome(rank, LayerVerdict.FAILS, refusal, alone=True)
        publish(server_args, role="scheduler", ranks=SpawnRanks(world_rank=rank, gpu_id=rank))
        parallel = get_parallel()
        if parallel.tp_size * parallel.pp_size != world:
            why = f"SGLang resolved {parallel.tp_size * parallel.pp_size} ranks, not {world}"
            return _RankOutcome(rank, LayerVerdict.NOT_SIMULATED, why, alone=True)
        try:
            _init_parallel_groups(
                backend="gloo",
                dist_init_method=f"tcp://127.0.0.1:{port}",
                server_args=server_args,
                gpu_id=rank,
            )
        except Exception as error:
            why = f"SGLang's process groups could not be built on CPU: {type(error).__name__}: "
            return _RankOutcome(rank, LayerVerdict.NOT_SIMULATED, f"{why}{error}", alone=True)
        with _groups_destroyed():
            return _layer_on_rank(rank, model_dir, profile, server_args)


@contextlib.contextmanager
def _groups_destroyed() -> Iterator[None]:
    """SGLang's groups and torch's default group destroyed after the block (their shared
    memory unlinked)."""
    import gc

    from sglang.srt.distributed.parallel_state import (
        destroy_distributed_environment,
        destroy_model_parallel,
    )

    try:
        yield
    finally:
        destroy_model_parallel()
        destroy_distributed_environment()
        gc.collect()


def _layer_on_rank(
    rank: int, model_dir: Path, profile: GpuProfile, server_args: Any
) -> _RankOutcome:
    """Build, load, process and run this rank's layer; the ranks agree before the all-reduce
    that every rank's forward went through."""
    import torch
    from sglang.srt.distributed import tensor_model_parallel_all_reduce
    from sglang.srt.layers.moe.topk import StandardTopKOutput

    from sglang_nvfp4_patches.simulation.cutlass_kernel import (
        cpu_cutlass_kernel,
        cuda_moves_stay_on_cpu,
    )
    from sglang_nvfp4_patches.simulation.moe_forward import (
        against_meaning,
        checkpoint_quant_config,
        forward_through,
        layer_experts,
    )
    from sglang_nvfp4_patches.simulation.scheduler import (
        _dp_attention_started,
        initialize_moe_config,
    )
    from sglang_nvfp4_patches.simulation.uncomputed_kernels import uncomputed_kernels

    def layer_forward(layer: Any, x: Any, router_weights: Any, ids: Any) -> Any:
        topk = StandardTopKOutput(topk_weights=router_weights, topk_ids=ids, router_logits=None)
        return layer.forward(x, topk)

    initialize_moe_config(server_args)
    model = moe_model(json.loads((model_dir / "config.json").read_text()))
    assert model is not None  # checked by the parent
    experts = layer_experts(model, int(server_args.ep_size or 1))
    with (
        _dp_attention_started(server_args),
        cpu_cutlass_kernel() as kernel,
        uncomputed_kernels(profile),
        cuda_moves_stay_on_cpu(),
    ):
        quant_config = checkpoint_quant_config(server_args)
        if quant_config is None:
            return _RankOutcome(rank, LayerVerdict.NOT_SIMULATED, "its checkpoint is not quantized")
        run, bug = None, None
        try:
            run = forward_through(model, quant_config, experts, profile, layer_forward)
        except Exception:  # the simulation's own failure
            bug = traceback.format_exc()
        kernel_ranks = _kernel_ranks(kernel.calls[-1]) if kernel.calls else None
        # Every rank reaches this: none is left waiting in the all-reduce for a failed one.
        went_through = torch.tensor([0 if run is None or run.failure else 1])
        torch.distributed.all_reduce(went_through, op=torch.distributed.ReduceOp.MIN)
        if run is None:
            return _RankOutcome(rank, None, "", bug=bug)
        if run.failure is not None:
            return _RankOutcome(rank, *run.failure, None, run.runner, kernel_ranks)
        if not int(went_through):
            return _RankOutcome(rank, None, "another rank failed", None, run.runner, kernel_ranks)
        run = replace(run, out=tensor_model_parallel_all_reduce(run.out))  # as the MoE block does
    verdict, detail, error = against_meaning(model, run)
    return _RankOutcome(rank, verdict, detail, error, run.runner, kernel_ranks)


def _kernel_ranks(call: Mapping[str, Any]) -> KernelRanks:
    """The rank arguments of one kernel call (one not passed: the kernel's default, 1 or 0)."""
    ep_size, ep_rank, tp_size, tp_rank = (
        int(call[name]) if call.get(name) is not None else default
        for name, default in (("ep_size", 1), ("ep_rank", 0), ("tp_size", 1), ("tp_rank", 0))
    )
    return ep_size, ep_rank, tp_size, tp_rank
