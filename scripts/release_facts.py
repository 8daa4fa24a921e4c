#!/usr/bin/env python3
"""Derive the release facts of every tested SGLang release and write the rows shipped in
``python/sglang_nvfp4_patches/release_facts.txt`` (``release_facts.py`` reads them).

Each release runs in its own process on its overlay (``scripts/build_overlay.sh``), with SGLang
loading the plugin as a server does, and derives each patch's cells as ``verify`` does (each
patch's ``release_facts``, its CPU simulations). A column no patch derives keeps the shipped
cell of the same sources, and a new row says ``unknown`` there: Gemma 4's root cause
(``gemma4:v-scale``) is never derived, as reading code cannot prove a fix. CI checks the file:
``verify`` on each release derives its row again.

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

from sglang_nvfp4_patches.release_facts import Row

REPO = Path(__file__).resolve().parents[1]
ONE = "--this-environment"


def derive_here() -> None:
    """Child: this interpreter's SGLang's row, as one ``ROW`` line of JSON on stdout."""
    from sglang.srt.plugins import load_plugins

    from sglang_nvfp4_patches.patches import PATCHES
    from sglang_nvfp4_patches.release_facts import fingerprint
    from sglang_nvfp4_patches.supported_releases import sglang_version

    os.environ["SGLANG_NVFP4_PATCHES_UNTESTED"] = "apply"
    load_plugins()
    cells: dict[str, str] = {}
    for patch in PATCHES:
        if patch.release_facts is not None:
            cells.update(patch.release_facts())
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


def row_of(release: str, found: dict, shipped: list[Row]) -> Row:
    """The derived row; a column no patch derives keeps the shipped cell of the same sources
    (``unknown`` for new sources)."""
    same = [row for row in shipped if row.fingerprint == found["fingerprint"]]
    kept = {
        column: next((row.cell(column) for row in same if row.cell(column)), "unknown")
        for column in dict.fromkeys(column for row in shipped for column in row.cells)
    }
    return Row(release, found["fingerprint"], {**kept, **found["cells"]})


def main(arguments: list[str]) -> int:
    import importlib.metadata

    from packaging.version import Version

    from sglang_nvfp4_patches.release_facts import SHIPPED, parse, render
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
        row = row_of(release, found, shipped)
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
