"""How much our plugin adds to a process that loads SGLang's plugins.

Times fresh interpreters that import ``sglang.srt.plugins`` and call ``load_plugins()``, with
``SGLANG_PLUGINS`` naming our entry point (the plugin loads) or nothing that exists (a bare
load: SGLang's own loader and imports only), alternating the two so machine load affects both
alike. Prints the median CPU time (user + system: what the process costs, steady under a
busy machine) and wall time of each, and their ratios (goal: at most 1.05).

    .venv/bin/python scripts/bench_plugin_load.py [--runs 9] [--force gemma4-attention]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

SNIPPET = "import sglang.srt.plugins as p; p.load_plugins()"


def one_run(whitelist: str, force: str | None) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one fresh process."""
    env = {**os.environ, "SGLANG_PLUGINS": whitelist}
    env.pop("SGLANG_NVFP4_PATCHES_FORCE", None)
    if force:
        env["SGLANG_NVFP4_PATCHES_FORCE"] = force
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", SNIPPET], env=env, check=True, capture_output=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--force", help="SGLANG_NVFP4_PATCHES_FORCE for the plugin runs")
    args = parser.parse_args()
    one_run("nvfp4_patches", args.force)  # warm the file cache for both
    bare, plugin = [], []
    for _ in range(args.runs):
        bare.append(one_run("no_such_plugin", None))
        plugin.append(one_run("nvfp4_patches", args.force))
    for index, what in enumerate(("CPU", "wall")):
        b = statistics.median(run[index] for run in bare)
        p = statistics.median(run[index] for run in plugin)
        print(
            f"{what:>4}: bare load_plugins() {b:.3f} s, with nvfp4_patches {p:.3f} s "
            f"(medians of {args.runs}): ratio {p / b:.3f} (goal <= 1.05)"
        )


if __name__ == "__main__":
    main()
