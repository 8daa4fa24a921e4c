"""``doctor``: what is patched in this SGLang, read back from SGLang after ``load_plugins()``."""

from __future__ import annotations

import argparse
import json

from sglang_nvfp4_patches.errors import EXIT_FAILED, EXIT_OK
from sglang_nvfp4_patches.patch_report import PatchReport, PatchState
from sglang_nvfp4_patches.patches import PATCHES
from sglang_nvfp4_patches.report_text import patch_lines
from sglang_nvfp4_patches.settings import DISABLE_ENV
from sglang_nvfp4_patches.supported_releases import dist_version, sglang_version, untested_phrase
from sglang_nvfp4_patches.this_process import decision, not_loaded, read_back, reports


def _gpu_seen() -> str:
    import torch

    if not torch.cuda.is_available():
        return "none"
    major, minor = torch.cuda.get_device_capability(0)
    return f"{torch.cuda.get_device_name(0)} (SM{major}{minor})"


def collect() -> dict[str, object]:
    """Load plugins as SGLang does, then read each patch's state back from SGLang."""
    from sglang.srt.plugins import load_plugins

    load_plugins()
    loaded = reports()
    decided = decision()
    gate = decided.gate
    if gate.tested:
        release = f"tested: {gate.sources_note()}" if gate.same_sources_as else "tested"
    else:
        action = "patches applied by opt-in" if gate.opted_in else "nothing patched"
        release = f"untested: {untested_phrase(gate.version)}; {action}"
    patches: dict[str, dict[str, str]] = {}
    for patch in PATCHES:
        name = patch.name
        if name in decided.disabled:
            report = PatchReport(name, PatchState.DISABLED, f"listed in {DISABLE_ENV}")
        elif not loaded:
            report = not_loaded(patch)
        else:
            report = read_back(patch)
        patches[name] = report.as_dict()
    return {
        "sglang": sglang_version(),
        "release": release,
        "flashinfer": dist_version("flashinfer-python"),
        "torch": dist_version("torch"),
        "gpu": _gpu_seen(),
        "plugin": dist_version("sglang-nvfp4-patches"),
        "patches": patches,
    }


def format_text(result: dict[str, object]) -> str:
    lines = [
        f"SGLang      {result['sglang']} ({result['release']})",
        f"FlashInfer  {result['flashinfer']}",
        f"torch       {result['torch']}",
        f"GPU         {result['gpu']}",
        f"plugin      sglang-nvfp4-patches {result['plugin']}",
        "",
    ]
    patches: dict[str, dict[str, str]] = result["patches"]  # type: ignore[assignment]
    width = max(len(name) for name in patches)
    for name, report in patches.items():
        lines.extend(patch_lines(name.ljust(width), report["status"], report["reason"]))
    return "\n".join(lines) + "\n"


def exit_status(result: dict[str, object]) -> int:
    """1 where a bug this plugin fixes is (or may be) live here and nothing fixes it, else 0."""
    patches: dict[str, dict[str, str]] = result["patches"]  # type: ignore[assignment]
    unfixed = {
        state.value for state in (PatchState.FAILED, PatchState.NOT_PATCHED, PatchState.UNKNOWN)
    }
    failed = any(report["status"] in unfixed for report in patches.values())
    return EXIT_FAILED if failed else EXIT_OK


def run_doctor(args: argparse.Namespace) -> int:
    result = collect()
    print(
        json.dumps(result, indent=2) if args.json else format_text(result),
        end="\n" if args.json else "",
    )
    return exit_status(result)
