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

# What each state means for one family on the GPUs it was found on.
PHRASES = {
    EvidenceState.UPSTREAM: "is upstream",
    EvidenceState.NOT_AFFECTED: "is not affected",
    EvidenceState.NO_REMEDY: "has no runner to publish",
    EvidenceState.UNKNOWN: "is unknown",
}


def _clauses(facts: Mapping[str, Any], live_verb: str) -> list[tuple[EvidenceState, str]]:
    """One clause per family and state, families and GPUs in a fixed order: ``Llama 4 on
    sm100, sm120 gets flashinfer_cutlass (why)``."""
    gpus = list(EVIDENCE_GPUS.values())
    groups: dict[tuple[str, EvidenceState], list[str]] = {}
    for key, fact in facts.items():
        family, _, gpu = key.partition(" on ")
        groups.setdefault((family, EvidenceState(fact["state"])), []).append(gpu)
    clauses = []
    for family, state in sorted(
        groups,
        key=lambda g: (g[0] != LLAMA4, g[0], list(PHRASES).index(g[1]) if g[1] in PHRASES else -1),
    ):
        found = sorted(groups[family, state], key=gpus.index)
        detail = facts[f"{family} on {found[0]}"]["detail"]
        what = live_verb if state is EvidenceState.LIVE else PHRASES[state]
        clauses.append((state, f"{family} on {', '.join(found)} {what} ({detail})"))
    return clauses


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
    verb = "gets" if live_state is PatchState.APPLIED else "would get"
    clauses = _clauses(facts, f"{verb} {CUTLASS}")
    states = {state for state, _ in clauses}
    reason = (
        "with no MoE runner given, "
        + "; ".join(text for _, text in clauses)
        + f" (evidence: {origin})"
    )
    if EvidenceState.UNKNOWN in states:
        return PatchReport(NAME, PatchState.UNKNOWN, f"{reason}; run `{VERIFY_COMMAND}`")
    if EvidenceState.LIVE in states:
        return PatchReport(NAME, live_state, reason)
    if EvidenceState.UPSTREAM in states:
        return PatchReport(NAME, PatchState.ALREADY_UPSTREAM, reason)
    return PatchReport(NAME, PatchState.NOT_APPLICABLE, reason)


def _evidence(live_state: PatchState) -> PatchReport:
    from sglang_nvfp4_patches.nvfp4_moe_runner.evidence import current_record

    record = current_record()
    if record is None:
        return no_record()
    return summary(record.facts, record.origin(sglang_version()), live_state)


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
