#!/usr/bin/env python3
"""Gather the evidence of ``nvfp4-moe-runner`` and ``llama4-router-weight`` on every tested SGLang
release and write the records shipped with each package (``python/sglang_nvfp4_patches/
<patch package>/verified_releases.json``): what a server on that release reads instead of
running the CPU simulation at start-up (``evidence_records.py``, docs/patches.md,
docs/llama4-rejection-reader.md).

Each release runs in its own process on its overlay (``scripts/build_overlay.sh``), with
SGLang loading the plugin as a server does, exactly as ``verify`` gathers it. CI checks the
file: ``verify`` on each release compares a fresh gathering with the shipped record.

Usage: ``.venv/bin/python scripts/record_evidence.py [--patch NAME] [RELEASE ...]`` (default:
both patches, every tested release; named releases replace their records and keep the
others). Exit 0 when every release was recorded, 1 when one could not be.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from sglang_nvfp4_patches.patch_names import EVIDENCE_MODULES

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "python" / "sglang_nvfp4_patches"
EVIDENCE = EVIDENCE_MODULES  # patch -> the package module that gathers its evidence
ONE = "--this-environment"


def shipped(patch: str) -> Path:
    return PACKAGE / patch.replace("-", "_") / "verified_releases.json"


def gather_here(patches: list[str]) -> None:
    """Child: the records of ``patches`` for the SGLang this interpreter imports, as JSON lines
    on stdout."""
    import importlib

    from sglang.srt.plugins import load_plugins

    from sglang_nvfp4_patches.evidence_records import SHIPPED_BY, Record, fingerprint
    from sglang_nvfp4_patches.simulation.server_args import quiet_sglang
    from sglang_nvfp4_patches.status import sglang_version

    os.environ["SGLANG_NVFP4_PATCHES_UNTESTED"] = "apply"
    load_plugins()
    for patch in patches:
        evidence = importlib.import_module(EVIDENCE[patch])
        with quiet_sglang():
            facts = evidence.gather()
        record = Record(patch, sglang_version(), fingerprint(evidence.SOURCES), SHIPPED_BY, facts)
        print("RECORD " + json.dumps(record.as_json(), sort_keys=True))


def records_of(release: str, primary: str, patches: list[str]) -> dict[str, dict] | None:
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
        [sys.executable, __file__, ONE, *patches],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RECORD ")]
    records = [json.loads(line.removeprefix("RECORD ")) for line in lines]
    if done.returncode != 0 or len(records) != len(patches):
        print(f"record_evidence: {release} failed: {done.stderr[-3000:]}", file=sys.stderr)
        return None
    if any(record["sglang"] != release for record in records):
        print(f"record_evidence: {release} imported SGLang {records[0]['sglang']}", file=sys.stderr)
        return None
    return {record["patch"]: record for record in records}


def main(arguments: list[str]) -> int:
    import importlib.metadata

    from packaging.version import Version

    from sglang_nvfp4_patches.supported_releases import TESTED_RELEASES

    patches = list(EVIDENCE)
    if arguments[:1] == ["--patch"] and len(arguments) > 1 and arguments[1] in EVIDENCE:
        patches, arguments = [arguments[1]], arguments[2:]
    elif arguments[:1] == ["--patch"]:
        print(f"record_evidence: --patch takes one of {', '.join(EVIDENCE)}", file=sys.stderr)
        return 2
    primary = importlib.metadata.version("sglang")
    wanted = arguments or list(TESTED_RELEASES)
    records: dict[str, dict[str, dict]] = {}
    for patch in patches:
        kept = json.loads(shipped(patch).read_text())["records"] if shipped(patch).exists() else []
        records[patch] = {item["sglang"]: item for item in kept if item["sglang"] not in wanted}
    failed = []
    for release in wanted:
        found = records_of(release, primary, patches)
        if found is None:
            failed.append(release)
            continue
        for patch, record in found.items():
            records[patch][release] = record
            states = sorted({str(fact["state"]) for fact in record["facts"].values()})
            print(f"record_evidence: {patch} {release}: {', '.join(states)}", file=sys.stderr)
    for patch in patches:
        ordered = [records[patch][key] for key in sorted(records[patch], key=Version)]
        body = json.dumps({"records": ordered}, indent=1, sort_keys=True) + "\n"
        shipped(patch).write_text(body)
        print(f"record_evidence: wrote {len(ordered)} records to {shipped(patch)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    if sys.argv[1:2] == [ONE]:
        gather_here(sys.argv[2:])
    else:
        sys.exit(main(sys.argv[1:]))
