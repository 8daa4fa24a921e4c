"""The evidence behind ``nvfp4-moe-runner``, gathered on CPU; its states are release facts.

Per MoE layer settings, simulated Blackwell GPU and launch line, :func:`gather` asks SGLang what
it publishes for a bundled stand-in checkpoint, runs its first MoE layer as SGLang ships it and
with ``--moe-runner-backend flashinfer_cutlass``, and :func:`.rule.evidence_of` says what that
shows. ``verify`` compares the states with the release facts' ``moe:`` columns (:func:`cells`);
a server reads its row (:func:`current_facts`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sglang_nvfp4_patches.models import moe_settings
from sglang_nvfp4_patches.nvfp4_moe_runner.rule import (
    AUTO,
    CUTLASS,
    EVIDENCE_GPUS,
    NVFP4,
    STATE_REASONS,
    Evidence,
    EvidenceKey,
    EvidenceState,
    evidence_of,
    launch_name,
)
from sglang_nvfp4_patches.release_facts import Row, current_row

# The launches across CPU ranks that show each layout dimension: (stand-in, GPU, layout of
# simulation.ranks.LAYOUTS), launched with no runner flag as operators launch them.
LAYOUT_RUNS: tuple[tuple[str, str, str], ...] = (
    ("nvidia/Qwen3-30B-A3B-FP4", "sm120", "tp2"),
    ("nvidia/Llama-4-Scout-17B-16E-Instruct-FP4", "sm100", "ep4"),
    ("nvidia/Qwen3-30B-A3B-FP4", "sm120", "pp2"),
)
NVFP4_SPELLINGS = (NVFP4, "modelopt")
COLUMN = "moe:"  # + the settings, no spaces: moe:silu,top-k
# A cell: per GPU (EVIDENCE_GPUS' order, "/" between), one letter per launch line
# (LAUNCHES' order); "." where this release offers no such launch line.
LAUNCHES = tuple(launch_name(q) for q in (None, *NVFP4_SPELLINGS))
LETTERS: dict[EvidenceState, str] = {
    EvidenceState.LIVE: "L",
    EvidenceState.UPSTREAM: "U",
    EvidenceState.NOT_AFFECTED: "A",
    EvidenceState.NO_REMEDY: "N",
    EvidenceState.NOT_COVERED: "C",
    EvidenceState.UNKNOWN: "?",
}
STATES = {letter: state for state, letter in LETTERS.items()}
ABSENT = "."


def cells(facts: Evidence) -> dict[str, str]:
    """The release-facts cells of gathered ``facts`` (states only)."""
    by_settings: dict[str, dict[tuple[str, str], str]] = {}
    for key, fact in facts.items():
        settings, gpu, launch = key
        by_settings.setdefault(settings, {})[gpu, launch] = LETTERS[EvidenceState(fact["state"])]
    return {
        COLUMN + settings.replace(" ", ""): "/".join(
            "".join(found.get((gpu, launch), ABSENT) for launch in LAUNCHES)
            for gpu in EVIDENCE_GPUS.values()
        )
        for settings, found in sorted(by_settings.items())
    }


def facts_of(row: Row) -> dict[EvidenceKey, dict[str, str]] | None:
    """A row's ``moe:`` facts per :class:`.rule.EvidenceKey` (``None``: it has none)."""
    found: dict[EvidenceKey, dict[str, str]] = {}
    for column in row.cells:
        cell = row.cell(column)
        if not column.startswith(COLUMN) or cell is None:
            continue
        settings = column[len(COLUMN) :].replace(",", ", ")
        for gpu, letters in zip(EVIDENCE_GPUS.values(), cell.split("/"), strict=True):
            for launch, letter in zip(LAUNCHES, letters, strict=True):
                if letter != ABSENT:
                    state = STATES[letter]
                    key = EvidenceKey(settings, gpu, launch)
                    found[key] = {"state": state.value, "detail": STATE_REASONS[state]}
    return found or None


def stand_ins() -> dict[str, Path]:
    """The bundled ModelOpt NVFP4 MoE configs the evidence runs, by checkpoint."""
    from sglang_nvfp4_patches.simulation.bundled import EVIDENCE_STAND_INS

    return dict(EVIDENCE_STAND_INS)


def settings_of(model_dir: Path) -> str:
    found = moe_settings(json.loads((model_dir / "config.json").read_text()))
    if found is None:
        raise ValueError(f"{model_dir}/config.json builds no MoE layer")
    return found.key


def current_facts() -> Evidence | None:
    """The facts of the row for the SGLang this process imported, if it has them."""
    row = current_row()
    return None if row is None else facts_of(row)


def gather_one(model_dir: Path, gpu: str, quantization: str | None) -> dict[str, Any]:
    """The state of one stand-in on one simulated GPU, launched with ``quantization``, and the
    runner SGLang publishes (the other patches act as in a server); a refusal of
    ``--moe-runner-backend flashinfer_cutlass`` is a failure on it."""
    from sglang_nvfp4_patches.nvfp4_moe_runner.suspension import suspended
    from sglang_nvfp4_patches.simulation.gpus import GPU_PROFILES
    from sglang_nvfp4_patches.simulation.moe_forward import run_first_moe_layer
    from sglang_nvfp4_patches.simulation.server_args import resolve

    profile = GPU_PROFILES[gpu]
    flags = {} if quantization is None else {"quantization": quantization}
    with suspended():
        published = resolve(model_dir, profile, **flags).moe_runner_backend
        unpatched = None
        if published in (None, AUTO):
            unpatched = run_first_moe_layer(model_dir, profile, flags)
    cutlass: dict[str, Any] | None = None
    if unpatched is not None and unpatched.broken:
        try:
            run = run_first_moe_layer(model_dir, profile, {**flags, "moe_runner_backend": CUTLASS})
            cutlass = None if run is None else run.as_json()
        except (ValueError, AssertionError) as refused:  # how SGLang refuses server arguments
            reason = " ".join(str(refused).split()) or type(refused).__name__
            cutlass = {"verdict": "fails", "detail": f"SGLang refuses it: {reason}"}
    state = evidence_of(published, None if unpatched is None else unpatched.as_json(), cutlass)
    return {"state": state.value, "published": published}


def _measured(fact: Mapping[str, Any]) -> bool:
    return fact["published"] in (None, AUTO)  # left at auto, so the layer was run


def merged(
    stand_in: str, fact: dict[str, Any], kept: dict[str, Any] | None, general: str | None
) -> dict[str, Any]:
    """The fact kept for one key when ``stand_in`` adds ``fact`` to ``kept``; ``general`` is
    the runner every architecture gets there (the control's). A run layer wins over a
    published runner; run layers that disagree are ``unknown``."""
    fact = {**fact, "stand_in": stand_in}
    if not _measured(fact) and fact["published"] != general:
        fact["state"] = EvidenceState.NOT_COVERED.value
    if kept is None or (not _measured(kept) and _measured(fact)):
        return fact
    if _measured(fact) and kept["state"] != fact["state"]:
        return {**kept, "state": EvidenceState.UNKNOWN.value}
    return kept


def gather() -> dict[EvidenceKey, dict[str, Any]]:
    """Every settings key the stand-ins give, on every simulated GPU and launch line (the
    control first)."""
    from sglang_nvfp4_patches.simulation.bundled import EVIDENCE_CONTROL
    from sglang_nvfp4_patches.simulation.server_args import flag_choices

    found: dict[EvidenceKey, dict[str, Any]] = {}
    general: dict[tuple[str, str], str | None] = {}
    models = sorted(stand_ins().items(), key=lambda item: item[1] != EVIDENCE_CONTROL)
    offered = flag_choices("--quantization")  # the NVFP4 spellings this SGLang offers
    spellings = [spelling for spelling in NVFP4_SPELLINGS if spelling in offered]
    for stand_in, model_dir in models:
        settings = settings_of(model_dir)
        for gpu in EVIDENCE_GPUS.values():
            for quantization in (None, *spellings):
                launch = launch_name(quantization)
                fact = gather_one(model_dir, gpu, quantization)
                if model_dir == EVIDENCE_CONTROL:
                    general[gpu, launch] = fact["published"]
                key = EvidenceKey(settings, gpu, launch)
                found[key] = merged(stand_in, fact, found.get(key), general[gpu, launch])
    return dict(sorted(found.items()))


def gather_layouts() -> tuple[dict[str, str], list[str]]:
    """The ``layouts`` cell (each dimension whose every run across CPU ranks serves, as on one
    GPU) and one line per run."""
    from types import SimpleNamespace

    from sglang_nvfp4_patches.moe_layout import COLUMN as LAYOUTS_COLUMN
    from sglang_nvfp4_patches.moe_layout import Layout, shown_cell
    from sglang_nvfp4_patches.simulation.moe_forward import LayerVerdict
    from sglang_nvfp4_patches.simulation.ranks import LAYOUTS, run_across_ranks

    models = stand_ins()
    shown: set[str] = set()
    failed: set[str] = set()
    lines = []
    for stand_in, gpu, layout in LAYOUT_RUNS:
        run = run_across_ranks(models[stand_in], gpu, layout)
        dimensions = Layout.of(SimpleNamespace(**LAYOUTS[layout])).dimensions
        (shown if run.verdict is LayerVerdict.SERVES else failed).update(dimensions)
        placement = " ".join(",".join(map(str, ranks)) for ranks in run.kernel_ranks)
        lines.append(
            f"{stand_in} {layout} on {gpu}: {run.verdict.value} ({run.detail}; the kernel's "
            f"ep_size,ep_rank,tp_size,tp_rank per rank: {placement or 'none'})"
        )
    return {LAYOUTS_COLUMN: shown_cell(shown - failed)}, lines


def facts_cells() -> dict[str, str]:
    """Every release-facts cell of this patch, gathered here (``scripts/release_facts.py``)."""
    from sglang_nvfp4_patches.simulation.server_args import quiet_sglang

    with quiet_sglang():
        return {**cells(gather()), **gather_layouts()[0]}
