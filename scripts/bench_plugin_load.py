"""How much our plugin adds to a process that loads SGLang's plugins.

Times fresh interpreters that import ``sglang.srt.plugins`` and call ``load_plugins()``, with
``SGLANG_PLUGINS`` naming our entry point (the plugin loads) or nothing that exists (a bare
load: SGLang's own loader and imports only), alternating the two so machine load affects both
alike. Prints the median wall time of each and their ratio (goal: at most 1.05).

    .venv/bin/python scripts/bench_plugin_load.py [--runs 9] [--force gemma4-attention]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

SNIPPET = "import sglang.srt.plugins as p; p.load_plugins()"


def one_run(whitelist: str, force: str | None) -> float:
    env = {**os.environ, "SGLANG_PLUGINS": whitelist}
    env.pop("SGLANG_NVFP4_PATCHES_FORCE", None)
    if force:
        env["SGLANG_NVFP4_PATCHES_FORCE"] = force
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", SNIPPET], env=env, check=True, capture_output=True)
    return time.perf_counter() - start


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
    b, p = statistics.median(bare), statistics.median(plugin)
    print(f"bare load_plugins(): median {b:.3f} s over {args.runs} runs")
    print(f"with nvfp4_patches:  median {p:.3f} s over {args.runs} runs")
    print(f"ratio: {p / b:.3f} (goal <= 1.05)")


if __name__ == "__main__":
    main()
