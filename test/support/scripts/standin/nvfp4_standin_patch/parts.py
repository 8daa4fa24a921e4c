"""The stand-in patch's functions, with the signatures ``patch.py`` asks for."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nvfp4_standin_patch import NAME
from sglang_nvfp4_patches.simulation.gpus import GpuProfile
from sglang_nvfp4_patches.simulation.moe_layer import LayerOutcome
from sglang_nvfp4_patches.status import PatchReport, PatchState
from sglang_nvfp4_patches.verify.result import CheckResult, run_check

INSTALLED: list[tuple[bool, bool]] = []  # each install() call's (forced, observe)


def install(forced: bool, observe: bool) -> PatchReport:
    INSTALLED.append((forced, observe))
    return current_state()


def current_state() -> PatchReport:
    return PatchReport(NAME, PatchState.APPLIED, "stand-in read back")


def unpatched_report() -> PatchReport:
    return PatchReport(NAME, PatchState.NOT_PATCHED, "stand-in probed read-only")


def explain_note(moe_runner: str | None) -> str:
    return f"{NAME}: stand-in note for the {moe_runner} MoE runner"


def layer_outcome(model_dir: Path, gpu: GpuProfile, flags: Mapping[str, Any]) -> LayerOutcome:
    return LayerOutcome(f"standin-on-{gpu.name}")


def _installed_once_by_the_plugin() -> str:
    from sglang_nvfp4_patches.process_record import reports

    if INSTALLED != [(False, False)] or reports()[NAME].state is not PatchState.APPLIED:
        raise AssertionError(f"install calls {INSTALLED}, report {reports().get(NAME)}")
    return "installed once by register() in this fresh process"


def run_checks() -> list[CheckResult]:
    return [run_check(NAME, "stand-in check", _installed_once_by_the_plugin)]
