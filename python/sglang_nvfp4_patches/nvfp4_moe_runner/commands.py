"""What the commands call of ``nvfp4-moe-runner``: the plugin's ``install`` (its question asked
through the server-args seam as SGLang imports it, so plugin load imports nothing), what
``doctor`` reads back (the hook on the seam, and what the release facts for this SGLang say per
launch line, MoE layer settings and GPU) and ``explain``'s note."""

from __future__ import annotations

import logging

from sglang_nvfp4_patches.nvfp4_moe_runner.rule import (
    CUTLASS,
    EVIDENCE_GPUS,
    NAME,
    NO_QUANTIZATION,
    NVFP4,
    Evidence,
    EvidenceKey,
    EvidenceState,
)
from sglang_nvfp4_patches.patch_report import PatchReport, PatchState
from sglang_nvfp4_patches.release_gate import VERIFY_COMMAND
from sglang_nvfp4_patches.server_args_seam import hooks
from sglang_nvfp4_patches.server_args_seam.seam import seam_module
from sglang_nvfp4_patches.supported_releases import sglang_version

logger = logging.getLogger("sglang_nvfp4_patches.nvfp4_moe_runner")
# What each state means for the MoE layers and GPUs it was found on (LIVE: the verb given).
PHRASES = {
    EvidenceState.LIVE: "",
    EvidenceState.NO_REMEDY: "fail on every runner this plugin can publish",
    EvidenceState.UNKNOWN: "are unknown",
    EvidenceState.NOT_COVERED: "are not covered",
    EvidenceState.UPSTREAM: "are upstream",
    EvidenceState.NOT_AFFECTED: "are not affected",
}


def _clauses(facts: Evidence, live_verb: str) -> list[tuple[EvidenceState, str]]:
    """One clause per launch line and state: ``no --quantization: silu, top-1 on sm100,
    sm120; gelu, top-k on sm120 get flashinfer_cutlass (why)``."""
    gpus = list(EVIDENCE_GPUS.values())
    groups: dict[tuple[str, EvidenceState], dict[str, list[str]]] = {}
    for key, fact in facts.items():
        settings, gpu, launch = key
        where = groups.setdefault((launch, EvidenceState(fact["state"])), {})
        where.setdefault(settings, []).append(gpu)
    clauses = []
    for launch, state in sorted(
        groups, key=lambda g: (g[0] != NO_QUANTIZATION, g[0], list(PHRASES).index(g[1]))
    ):
        where = groups[launch, state]
        layers = "; ".join(
            f"{settings} on {', '.join(sorted(found, key=gpus.index))}"
            for settings, found in sorted(where.items())
        )
        first, found = min(where.items())
        detail = facts[EvidenceKey(first, sorted(found, key=gpus.index)[0], launch)]["detail"]
        what = live_verb if state is EvidenceState.LIVE else PHRASES[state]
        clauses.append((state, f"{launch}: {layers} {what} ({detail})"))
    return clauses


def no_record() -> PatchReport:
    return PatchReport(
        NAME,
        PatchState.UNKNOWN,
        f"no verified record for SGLang {sglang_version()} (its sources match no release CI "
        f"checked, and verify has not recorded them here): run `{VERIFY_COMMAND}`",
    )


def summary(facts: Evidence, origin: str, live_state: PatchState) -> PatchReport:
    """One report from the record's facts; ``live_state``: what a live failure means here."""
    verb = "get" if live_state is PatchState.APPLIED else "would get"
    clauses = _clauses(facts, f"{verb} {CUTLASS}")
    states = {state for state, _ in clauses}
    reason = (
        "ModelOpt NVFP4 MoE layers, any architecture, with no MoE runner given and "
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


def _evidence(live_state: PatchState, where: str) -> PatchReport:
    """The release facts' report, ``where`` before its reason where the failure is live."""
    from sglang_nvfp4_patches.nvfp4_moe_runner.evidence import facts_of
    from sglang_nvfp4_patches.release_facts import current_row

    row = current_row()
    facts = None if row is None else facts_of(row)
    if row is None or facts is None:
        return no_record()
    report = summary(facts, row.origin(sglang_version()), live_state)
    if report.state is live_state:
        return PatchReport(NAME, live_state, f"{where}: {report.reason}")
    return report


def current_state() -> PatchReport:
    """The hook on the seam, and the evidence it decides from."""
    if hooks.times_asked(NAME) != 1:
        return PatchReport(NAME, PatchState.FAILED, f"not installed in the {hooks.where()}")
    return _evidence(PatchState.APPLIED, hooks.where())


def unpatched_report() -> PatchReport:
    """The evidence, read-only, where nothing is installed."""
    return _evidence(PatchState.NOT_PATCHED, "live here")


def install(forced: bool, observe: bool) -> PatchReport:
    """Ask the question when SGLang imports the seam; ``observe``: wire nothing, say whether
    the failure is live here. ``forced`` is never true: this patch cannot be forced."""
    if observe:
        report = unpatched_report()
        if report.state is PatchState.UNKNOWN:  # nothing wired, nothing known: say what to do
            logger.warning(
                "[%s] %s. A ModelOpt NVFP4 MoE checkpoint launched here with the MoE runner "
                "left at auto may fail at its first forward (the layer building the "
                "flashinfer_trtllm runner on weights prepared for CUTLASS: 'g1_scale_c'); "
                "--moe-runner-backend flashinfer_cutlass avoids it.",
                NAME,
                report.reason,
            )
        return report
    failure = hooks.ask(NAME)
    if failure is not None:
        return PatchReport(NAME, PatchState.FAILED, failure)
    pending = "decided when SGLang resolves a ModelOpt NVFP4 MoE checkpoint"
    return PatchReport(
        NAME, PatchState.PENDING, f"{pending} (hooked when {seam_module()} is imported)"
    )


def explain_note(moe_runner: str | None, moe_quantization: str | None) -> str:
    """One line for a ModelOpt NVFP4 MoE row (none for any other checkpoint)."""
    if moe_quantization != NVFP4:
        return ""
    from sglang_nvfp4_patches.nvfp4_moe_runner.evidence import facts_of
    from sglang_nvfp4_patches.release_facts import current_row

    row = current_row()
    if row is None or facts_of(row) is None:
        return f"{NAME} cannot tell here ({no_record().reason})"
    return (
        f"{NAME}: a ModelOpt NVFP4 MoE checkpoint launched with no MoE runner gets {CUTLASS} "
        f"where SGLang's own layer fails at the first forward (evidence recorded by "
        f"{row.made_by})"
    )
