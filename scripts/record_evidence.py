#!/usr/bin/env python3
"""Gather ``nvfp4-moe-runner``'s evidence on every tested SGLang release and write the records
shipped with the package (``python/sglang_nvfp4_patches/nvfp4_moe_runner/
verified_releases.json``): what a server on that release reads instead of running the CPU
simulation at start-up (``evidence_records.py``, docs/patches.md).

Each release runs in its own process on its overlay (``scripts/build_overlay.sh``), with
SGLang loading the plugin as a server does, exactly as ``verify`` gathers it. CI checks the
file: ``verify`` on each release compares a fresh gathering with the shipped record.

Usage: ``.venv/bin/python scripts/record_evidence.py [RELEASE ...]`` (default: every tested
release; named releases replace their records and keep the others). Exit 0 when every
release was recorded, 1 when one could not be.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHIPPED = REPO / "python" / "sglang_nvfp4_patches" / "nvfp4_moe_runner" / "verified_releases.json"
ONE = "--this-environment"


def gather_here() -> None:
    """Child: the record for the SGLang this interpreter imports, as JSON on stdout."""
    from sglang.srt.plugins import load_plugins

    from sglang_nvfp4_patches.evidence_records import Record, fingerprint
    from sglang_nvfp4_patches.nvfp4_moe_runner import NAME
    from sglang_nvfp4_patches.nvfp4_moe_runner.evidence import SOURCES, gather
    from sglang_nvfp4_patches.simulation.server_args import quiet_sglang
    from sglang_nvfp4_patches.status import sglang_version

    os.environ["SGLANG_NVFP4_PATCHES_UNTESTED"] = "apply"
    load_plugins()
    with quiet_sglang():
        facts = gather()
    record = Record(NAME, sglang_version(), fingerprint(SOURCES), "CI", facts)
    print("RECORD " + json.dumps(record.as_json(), sort_keys=True))


def record_of(release: str, primary: str) -> dict | None:
    env = dict(os.environ)
    if release != primary:
        built = subprocess.run(
            [str(REPO / "scripts" / "build_overlay.sh"), release],
            capture_output=True,
            text=True,
            check=False,
        )
        if built.returncode != 0:
            print(
                f"record_evidence: no overlay of {release}: {built.stderr[-2000:]}", file=sys.stderr
            )
            return None
        env["PYTHONPATH"] = built.stdout.strip()
    done = subprocess.run(
        [sys.executable, __file__, ONE], capture_output=True, text=True, env=env, check=False
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RECORD ")]
    if done.returncode != 0 or not lines:
        print(f"record_evidence: {release} failed: {done.stderr[-3000:]}", file=sys.stderr)
        return None
    record = json.loads(lines[-1].removeprefix("RECORD "))
    if record["sglang"] != release:
        print(f"record_evidence: {release} imported SGLang {record['sglang']}", file=sys.stderr)
        return None
    return record


def main(releases: list[str]) -> int:
    import importlib.metadata

    from packaging.version import Version

    from sglang_nvfp4_patches.supported_releases import TESTED_RELEASES

    primary = importlib.metadata.version("sglang")
    wanted = releases or list(TESTED_RELEASES)
    kept = json.loads(SHIPPED.read_text())["records"] if SHIPPED.exists() else []
    records = {item["sglang"]: item for item in kept if item["sglang"] not in wanted}
    failed = []
    for release in wanted:
        record = record_of(release, primary)
        if record is None:
            failed.append(release)
            continue
        records[release] = record
        states = sorted({fact["state"] for fact in record["facts"].values()})
        print(f"record_evidence: {release}: {', '.join(states)}", file=sys.stderr)
    ordered = [records[key] for key in sorted(records, key=Version)]
    SHIPPED.write_text(json.dumps({"records": ordered}, indent=1, sort_keys=True) + "\n")
    print(f"record_evidence: wrote {len(ordered)} records to {SHIPPED}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    if sys.argv[1:] == [ONE]:
        gather_here()
    else:
        sys.exit(main(sys.argv[1:]))
