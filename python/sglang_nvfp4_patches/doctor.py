"""``doctor``: what is patched in this SGLang, read back from SGLang after ``load_plugins()``."""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
from collections.abc import Callable

from sglang_nvfp4_patches import flashinfer_cutlass_runner, plugin, server_args_gemma4_default
from sglang_nvfp4_patches.errors import EXIT_FAILED, EXIT_OK
from sglang_nvfp4_patches.gemma4_attention_rule import AFFECTED_BACKEND, SAFE_BACKEND
from sglang_nvfp4_patches.settings import (
    DISABLE_ENV,
    InvalidForceError,
    UnknownPatchNameError,
    disabled_patches,
    forced_patches,
)
from sglang_nvfp4_patches.sglang_hooks import PLUGIN_ENTRY_POINT
from sglang_nvfp4_patches.status import PatchReport, PatchState, sglang_version
from sglang_nvfp4_patches.supported_releases import is_supported


def _dist_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _gpu_seen() -> str:
    import torch

    if not torch.cuda.is_available():
        return "none"
    major, minor = torch.cuda.get_device_capability(0)
    return f"{torch.cuda.get_device_name(0)} (SM{major}{minor})"


def _gemma4_state() -> PatchReport:
    """Registered is not enough: ask SGLang to resolve the bundled NVFP4 MoE config (FP8 KV
    cache) on a simulated SM100 and check the answer: triton where the rule acts, SGLang's
    own trtllm_mha where the root cause is fixed upstream."""
    report = server_args_gemma4_default.current_state()
    if report.state is PatchState.APPLIED:
        expected = SAFE_BACKEND
    elif report.state is PatchState.ALREADY_UPSTREAM:
        expected = AFFECTED_BACKEND
    else:
        return report
    from sglang_nvfp4_patches.explain import EXAMPLES_DIR
    from sglang_nvfp4_patches.gpu_profiles import GPU_PROFILES
    from sglang_nvfp4_patches.sglang_resolution import resolve

    resolved = resolve(EXAMPLES_DIR / "gemma-4-26b-a4b-nvfp4", GPU_PROFILES["sm100"])
    if resolved.attention_backend != expected:
        return PatchReport(
            report.name,
            PatchState.FAILED,
            f"{report.reason}, yet SGLang resolves the bundled NVFP4 MoE config on simulated "
            f"SM100 to {resolved.attention_backend}, not {expected}",
        )
    return PatchReport(
        report.name,
        report.state,
        f"{report.reason} (verified: SGLang resolves it to {expected} on SM100)",
    )


STATE_READERS: dict[str, Callable[[], PatchReport]] = {
    server_args_gemma4_default.PATCH_NAME: _gemma4_state,
    flashinfer_cutlass_runner.PATCH_NAME: flashinfer_cutlass_runner.current_state,
}


def _read_state(name: str) -> PatchReport:
    try:
        return STATE_READERS[name]()
    except Exception as error:  # doctor reports, it never crashes on a broken release
        return PatchReport(name, PatchState.FAILED, f"cannot read state: {error}")


def collect() -> dict[str, object]:
    """Load plugins as SGLang does, then read each patch's state back from SGLang."""
    from sglang.srt.plugins import load_plugins

    load_plugins()
    loaded = plugin.reports()
    patches: dict[str, dict[str, str]] = {}
    try:
        disabled = disabled_patches()
        config_error = None
    except UnknownPatchNameError as error:
        disabled, config_error = frozenset(), str(error)
    supported = is_supported(sglang_version())
    for name in STATE_READERS:
        if not supported:
            report = plugin.OUT_OF_RANGE_REPORTS[name]()
        elif config_error is not None:
            report = PatchReport(name, PatchState.FAILED, config_error)
        elif name in disabled:
            report = PatchReport(name, PatchState.DISABLED, f"listed in {DISABLE_ENV}")
        elif not loaded:
            report = PatchReport(
                name,
                PatchState.DISABLED,
                "SGLang did not load the plugin (SGLANG_PLUGINS="
                f"{os.environ.get('SGLANG_PLUGINS', '')!r} does not name {PLUGIN_ENTRY_POINT})",
            )
        else:
            report = _read_state(name)
        patches[name] = report.as_dict()
    try:
        forced_patches()
    except InvalidForceError as error:  # the plugin logged one ERROR and forced nothing
        gemma4 = patches[server_args_gemma4_default.PATCH_NAME]
        gemma4["reason"] = f"{gemma4['reason']} ({error})"
    return {
        "sglang": sglang_version(),
        "flashinfer": _dist_version("flashinfer-python"),
        "torch": _dist_version("torch"),
        "gpu": _gpu_seen(),
        "plugin": _dist_version("sglang-nvfp4-patches"),
        "patches": patches,
    }


def format_text(result: dict[str, object]) -> str:
    lines = [
        f"SGLang      {result['sglang']}",
        f"FlashInfer  {result['flashinfer']}",
        f"torch       {result['torch']}",
        f"GPU         {result['gpu']}",
        f"plugin      sglang-nvfp4-patches {result['plugin']}",
        "",
    ]
    patches: dict[str, dict[str, str]] = result["patches"]  # type: ignore[assignment]
    width = max(len(name) for name in patches)
    for name, report in patches.items():
        lines.append(f"{name.ljust(width)}  {report['status']}: {report['reason']}")
    return "\n".join(lines) + "\n"


def run_doctor(args: argparse.Namespace) -> int:
    result = collect()
    print(
        json.dumps(result, indent=2) if args.json else format_text(result),
        end="\n" if args.json else "",
    )
    patches: dict[str, dict[str, str]] = result["patches"]  # type: ignore[assignment]
    failed = any(report["status"] == PatchState.FAILED.value for report in patches.values())
    return EXIT_FAILED if failed else EXIT_OK
