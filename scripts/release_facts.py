#!/usr/bin/env python3
"""Derive the release facts of every tested SGLang release and write the rows shipped in
``python/sglang_nvfp4_patches/release_facts.txt`` (``release_facts.py`` reads them).

Each release runs in its own process on its overlay (``scripts/build_overlay.sh``), with SGLang
loading the plugin as a server does, and derives each cell as ``verify`` does: the Gemma 4
root-cause reading, and the CPU simulations of ``llama4-router-weight`` and
``nvfp4-moe-runner``. CI checks the file: ``verify`` on each release derives its row again.

Usage: ``.venv/bin/python scripts/release_facts.py [--check] [RELEASE ...]`` (default: every
tested release; named releases replace their rows and keep the others; ``--check`` writes
nothing and exits 1 where a derived row differs from the shipped one). Exit 0 when every
release was derived (and, with ``--check``, agrees), 1 otherwise.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ONE = "--this-environment"


def derive_here() -> None:
    """Child: this interpreter's SGLang's row, as one ``ROW`` line of JSON on stdout."""
    from sglang.srt.plugins import load_plugins

    from sglang_nvfp4_patches.gemma4_attention import backend_source
    from sglang_nvfp4_patches.llama4_router_weight import evidence as llama4
    from sglang_nvfp4_patches.nvfp4_moe_runner import evidence as moe
    from sglang_nvfp4_patches.release_facts import fingerprint
    from sglang_nvfp4_patches.simulation.server_args import quiet_sglang
    from sglang_nvfp4_patches.status import sglang_version

    os.environ["SGLANG_NVFP4_PATCHES_UNTESTED"] = "apply"
    load_plugins()
    cells = {backend_source.COLUMN: backend_source.read_verdict().handoff.value}
    with quiet_sglang():
        cells.update(llama4.cells(llama4.gather()))
        cells.update(moe.cells(moe.gather()))
        cells.update(moe.gather_layouts()[0])
    row = {"release": sglang_version(), "fingerprint": fingerprint(), "cells": cells}
    print("ROW " + json.dumps(row))


def derive(release: str, primary: str) -> dict | None:
    env = {**os.environ, "PYTHONPATH": str(REPO / "python")}  # this checkout's plugin
    if release != primary:
        built = subprocess.run(
            [str(REPO / "scripts" / "build_overlay.sh"), release],
            capture_output=True,
            text=True,
            check=False,
        )
        if built.returncode != 0:
            print(
                f"release_facts: no overlay of {release}: {built.stderr[-2000:]}", file=sys.stderr
            )
            return None
        env["PYTHONPATH"] = os.pathsep.join([built.stdout.strip(), env["PYTHONPATH"]])
    done = subprocess.run(
        [sys.executable, __file__, ONE], capture_output=True, text=True, env=env, check=False
    )
    rows = [json.loads(line[4:]) for line in done.stdout.splitlines() if line.startswith("ROW ")]
    if done.returncode != 0 or len(rows) != 1 or rows[0]["release"] != release:
        print(f"release_facts: {release} failed: {done.stderr[-3000:]}", file=sys.stderr)
        return None
    return rows[0]


def main(arguments: list[str]) -> int:
    import importlib.metadata

    from packaging.version import Version

    from sglang_nvfp4_patches.release_facts import SHIPPED, Row, parse, render
    from sglang_nvfp4_patches.supported_releases import TESTED_RELEASES

    check = arguments[:1] == ["--check"]
    wanted = arguments[check:] or list(TESTED_RELEASES)
    text = SHIPPED.read_text() if SHIPPED.exists() else ""
    columns, shipped = parse(text)
    rows = {row.release: row for row in shipped}
    primary = importlib.metadata.version("sglang")
    failed = []
    for release in wanted:
        found = derive(release, primary)
        if found is None:
            failed.append(release)
            continue
        row = Row(release, found["fingerprint"], found["cells"])
        columns = tuple(dict.fromkeys([*columns, *row.cells]))
        if check and rows.get(release) != row:
            print(f"release_facts: {release} differs: {row} (shipped: {rows.get(release)})")
            failed.append(release)
        rows[release] = row
        print(f"release_facts: {release} {row.fingerprint} {' '.join(row.cells.values())}")
    if not check:
        ordered = [rows[key] for key in sorted(rows, key=Version)]
        legend = "".join(line + "\n" for line in text.splitlines() if line.startswith("#"))
        SHIPPED.write_text(render(columns, ordered, legend))
    return 1 if failed else 0


if __name__ == "__main__":
    if sys.argv[1:2] == [ONE]:
        derive_here()
    else:
        sys.exit(main(sys.argv[1:]))
