"""Benchmark (not a test) of the ``llama4-router-weight`` patch's costs on CPU.

Part 1, pre-scale overhead: ``prescale_router_weight_on_input`` on bf16 hidden states
``[T, 5120]`` against its floor, one plain elementwise multiply of the same tensor by a
``[T, 1]`` weight (one read and one write of the hidden states, 2*T*H*2 bytes), measured
interleaved in one run, medians of many repetitions. Goal: at most 1.3x the floor at >= 512
tokens. Then which allocations one call makes (torch profiler), and whether the unit final
scales are a view of a cached buffer (same data_ptr across calls).

Part 2, plugin load cost: ``sglang.srt.plugins.load_plugins()`` in fresh subprocesses with
``SGLANG_PLUGINS=nvfp4_patches`` (only this plugin) vs ``SGLANG_PLUGINS=__none__`` (a
whitelist matching nothing): the call alone and the whole process wall time (import
included). Goal: at most 1.05x. Skipped when the plugin is not installed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from importlib.metadata import entry_points

import torch
from torch.profiler import ProfilerActivity, profile

from sglang_nvfp4_patches.llama4_router_weight.prescale import prescale_router_weight_on_input

HIDDEN = 5120
TOKEN_COUNTS = (1, 8, 64, 512, 4096)
PLUGIN_NAME = "nvfp4_patches"
CHILD_CODE = (
    "import time, sglang.srt.plugins as p; t=time.perf_counter(); p.load_plugins(); "
    "print(time.perf_counter()-t)"
)


def _sample_seconds(fn: Callable[[], object], inner: int) -> float:
    start = time.perf_counter()
    for _ in range(inner):
        fn()
    return (time.perf_counter() - start) / inner


def interleaved_medians(
    candidates: dict[str, Callable[[], object]], samples: int, inner: int
) -> dict[str, float]:
    """Median seconds per call of each candidate, alternating them (and their order) sample
    by sample so drift and ordering effects hit all of them alike."""
    for fn in candidates.values():  # warm-up
        _sample_seconds(fn, inner)
    times: dict[str, list[float]] = {name: [] for name in candidates}
    order = list(candidates.items())
    for sample in range(samples):
        for name, fn in order if sample % 2 == 0 else reversed(order):
            times[name].append(_sample_seconds(fn, inner))
    return {name: statistics.median(values) for name, values in times.items()}


def bench_prescale() -> None:
    print(f"## Pre-scale overhead (CPU, bf16, hidden {HIDDEN}, {torch.get_num_threads()} threads)")
    print(
        "| tokens | floor x*w [us] | prescale [us] | ratio | extra [us] "
        "| floor bytes (2*T*H*2) | floor GB/s |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    generator = torch.Generator().manual_seed(0)
    for tokens in TOKEN_COUNTS:
        x = torch.randn(tokens, HIDDEN, generator=generator).to(torch.bfloat16)
        w = torch.rand(tokens, 1, generator=generator)  # SGLang's router weights are float32
        w_cast = w.to(torch.bfloat16)
        inner = max(1, 1024 // tokens)
        samples = 101 if tokens <= 512 else 25
        medians = interleaved_medians(
            {
                "floor": lambda x=x, w_cast=w_cast: x * w_cast,
                "prescale": lambda x=x, w=w: prescale_router_weight_on_input(x, w),
            },
            samples,
            inner,
        )
        floor, prescale = medians["floor"], medians["prescale"]
        nbytes = 2 * tokens * HIDDEN * 2
        print(
            f"| {tokens} | {floor * 1e6:.1f} | {prescale * 1e6:.1f} | {prescale / floor:.2f}x "
            f"| {(prescale - floor) * 1e6:.1f} | {nbytes} | {nbytes / floor / 1e9:.1f} |"
        )
    print(
        "Goal: ratio <= 1.3x at >= 512 tokens. 'extra' is the fixed per-call cost (argument "
        "checks, the [T, 1] weight cast, the cached unit-scale view)."
    )


def report_allocations(tokens: int = 512) -> None:
    print(f"\n## Allocations of one call ({tokens} tokens, steady state)")
    x = torch.randn(tokens, HIDDEN).to(torch.bfloat16)
    w = torch.rand(tokens, 1)
    _, first_unit = prescale_router_weight_on_input(x, w)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        scaled, unit = prescale_router_weight_on_input(x, w)
    allocations = [e for e in prof.events() if e.cpu_memory_usage > 0 and e.name != "[memory]"]
    leaf_names = {"aten::empty", "aten::empty_strided", "aten::mul"}
    leaves = [e for e in allocations if e.name in leaf_names]
    frees = [e for e in prof.events() if e.name == "[memory]" and e.cpu_memory_usage < 0]
    scaled_bytes = scaled.numel() * scaled.element_size()
    for event in leaves:
        print(f"- {event.name}: {event.cpu_memory_usage} bytes allocated")
    print(f"- freed before returning: {-sum(e.cpu_memory_usage for e in frees)} bytes")
    print(
        f"- scaled activations: {scaled_bytes} bytes (returned); the rest is the transient "
        f"bf16 cast of the [T, 1] router weights (T*2 = {tokens * 2} bytes)"
    )
    _, again = prescale_router_weight_on_input(x[: tokens // 2], w[: tokens // 2])
    same_buffer = first_unit.data_ptr() == unit.data_ptr() == again.data_ptr()
    print(
        f"- unit final scales: data_ptr identical across 3 calls: {same_buffer} "
        "(a view of one cached float32 ones buffer, no per-call allocation)"
    )


def plugin_installed() -> str | None:
    """None when the plugin can be loaded, otherwise why not."""
    names = [ep for ep in entry_points(group="sglang.srt.plugins") if ep.name == PLUGIN_NAME]
    if not names:
        return f"no '{PLUGIN_NAME}' entry point in group sglang.srt.plugins (pip install -e .)"
    try:
        names[0].load()
    except Exception as error:  # any import failure means: not usable yet
        return f"entry point {names[0].value} does not import: {type(error).__name__}: {error}"
    return None


def _run_child(whitelist: str, code: str) -> tuple[float, float]:
    """(load_plugins seconds printed by the child, whole process wall seconds)."""
    env = dict(os.environ, SGLANG_PLUGINS=whitelist)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    wall = time.perf_counter() - start
    return float(done.stdout.strip().splitlines()[-1]), wall


def bench_plugin_load(runs: int, server_context: bool) -> None:
    print(f"\n## Plugin load cost ({runs} fresh processes per setting, medians)")
    missing = plugin_installed()
    if missing is not None:
        print(f"Skipped: {missing}.")
        return
    settings = {"with plugin": PLUGIN_NAME, "without plugin": "__none__"}
    setups = [("plain", CHILD_CODE)]
    if server_context:  # modules a server has imported anyway before it serves
        preload = "import sglang.srt.server_args, sglang.srt.configs.model_config; "
        setups.append(("after server imports", preload + CHILD_CODE))
    for label, code in setups:
        _run_child(settings["without plugin"], code)  # warm the file cache
        load: dict[str, list[float]] = {name: [] for name in settings}
        wall: dict[str, list[float]] = {name: [] for name in settings}
        for _ in range(runs):
            for name, whitelist in settings.items():
                seconds, process = _run_child(whitelist, code)
                load[name].append(seconds)
                wall[name].append(process)
        with_load = statistics.median(load["with plugin"])
        without_load = statistics.median(load["without plugin"])
        with_wall = statistics.median(wall["with plugin"])
        without_wall = statistics.median(wall["without plugin"])
        print(f"### {label}")
        print("| measure | with plugin [s] | without [s] | ratio |")
        print("|:---|---:|---:|---:|")
        print(
            f"| load_plugins() call | {with_load:.4f} | {without_load:.4f} "
            f"| {with_load / without_load:.2f}x |"
        )
        print(
            f"| whole process (import included) | {with_wall:.2f} | {without_wall:.2f} "
            f"| {with_wall / without_wall:.3f}x |"
        )
    print("Goal: ratio <= 1.05x.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--load-runs", type=int, default=5, help="processes per setting")
    parser.add_argument("--skip-load", action="store_true", help="only the pre-scale part")
    parser.add_argument(
        "--server-context",
        action="store_true",
        help="also time load_plugins() after importing server modules first",
    )
    args = parser.parse_args()
    print(f"torch {torch.__version__}, Python {sys.version.split()[0]}")
    bench_prescale()
    report_allocations()
    if not args.skip_load:
        bench_plugin_load(args.load_runs, args.server_context)


if __name__ == "__main__":
    main()
