"""What ``doctor`` reads back of ``nvfp4-moe-runner``: whether its hook is on the seam, and
what the evidence record for this SGLang says, per model family and GPU."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sglang_nvfp4_patches.models import LLAMA4
from sglang_nvfp4_patches.nvfp4_moe_runner import NAME
from sglang_nvfp4_patches.nvfp4_moe_runner.rule import CUTLASS, EVIDENCE_GPUS, EvidenceState
from sglang_nvfp4_patches.release_gate import VERIFY_COMMAND
from sglang_nvfp4_patches.status import PatchReport, PatchState, sglang_version


def _where(keys: list[str]) -> str:
    """``Llama 4 on sm100, sm120; Gemma 4 on sm120`` from evidence keys (families and GPUs
    in a fixed order)."""
    gpus = list(EVIDENCE_GPUS.values())
    by_family: dict[str, list[str]] = {}
    for key in keys:
        family, _, gpu = key.partition(" on ")
        by_family.setdefault(family, []).append(gpu)
    return "; ".join(
        f"{family} on {', '.join(sorted(by_family[family], key=gpus.index))}"
        for family in sorted(by_family, key=lambda name: (name != LLAMA4, name))
    )


def _by_state(facts: Mapping[str, Any]) -> dict[EvidenceState, list[str]]:
    grouped: dict[EvidenceState, list[str]] = {}
    for key, fact in facts.items():
        grouped.setdefault(EvidenceState(fact["state"]), []).append(key)
    return grouped


def _first_detail(facts: Mapping[str, Any], keys: list[str]) -> str:
    return facts[min(keys, key=lambda key: (LLAMA4 not in key, key))]["detail"]


def no_record() -> PatchReport:
    return PatchReport(
        NAME,
        PatchState.UNKNOWN,
        f"no verified record for SGLang {sglang_version()} (its sources match no release CI "
        f"checked, and verify has not recorded them here): run `{VERIFY_COMMAND}`",
    )


def summary(facts: Mapping[str, Any], origin: str, live_state: PatchState) -> PatchReport:
    """One report from the record's facts; ``live_state`` is what a live failure means here
    (``applied`` where the hook acts, ``not patched`` where nothing is wired)."""
    grouped = _by_state(facts)
    notes = []
    live = grouped.get(EvidenceState.LIVE, [])
    if live:
        verb = "get" if live_state is PatchState.APPLIED else "would get"
        notes.append(
            f"with no MoE runner given, ModelOpt NVFP4 MoE checkpoints {verb} {CUTLASS} for "
            f"{_where(live)}: there {_first_detail(facts, live)}"
        )
    for state, label in (
        (EvidenceState.UPSTREAM, "upstream"),
        (EvidenceState.NOT_AFFECTED, "not affected"),
        (EvidenceState.NO_REMEDY, "no runner to publish"),
        (EvidenceState.UNKNOWN, "cannot tell"),
    ):
        keys = grouped.get(state, [])
        if keys:
            notes.append(f"{label} for {_where(keys)}: {_first_detail(facts, keys)}")
    reason = "; ".join(notes) + f" (evidence: {origin})"
    if EvidenceState.UNKNOWN in grouped:
        return PatchReport(NAME, PatchState.UNKNOWN, f"{reason}; run `{VERIFY_COMMAND}`")
    if live:
        return PatchReport(NAME, live_state, reason)
    if EvidenceState.UPSTREAM in grouped:
        return PatchReport(NAME, PatchState.ALREADY_UPSTREAM, reason)
    return PatchReport(NAME, PatchState.NOT_APPLICABLE, reason)


def _evidence(live_state: PatchState) -> PatchReport:
    from sglang_nvfp4_patches.nvfp4_moe_runner.evidence import current_record

    record = current_record()
    if record is None:
        return no_record()
    origin = f"recorded by {record.made_by} for SGLang {record.sglang}"
    return summary(record.facts, origin, live_state)


def current_state() -> PatchReport:
    """The hook on the seam, and the evidence it decides from."""
    from sglang_nvfp4_patches.nvfp4_moe_runner import seam_hooks
    from sglang_nvfp4_patches.override_seam import find_override_seam

    seam = find_override_seam()
    if not seam_hooks.installed(seam):
        return PatchReport(NAME, PatchState.FAILED, f"not installed in the {seam.name}")
    report = _evidence(PatchState.APPLIED)
    if report.state is PatchState.APPLIED:
        return PatchReport(NAME, report.state, f"{seam.name}: {report.reason}")
    return report


def unpatched_report() -> PatchReport:
    """The evidence, read-only, where nothing is installed."""
    report = _evidence(PatchState.NOT_PATCHED)
    if report.state is PatchState.NOT_PATCHED:
        return PatchReport(NAME, report.state, f"live here: {report.reason}")
    return report
