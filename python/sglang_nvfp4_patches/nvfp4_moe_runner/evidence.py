"""The evidence behind ``nvfp4-moe-runner``, gathered on CPU and kept as a record.

Per model family (the bundled ModelOpt NVFP4 configs of Llama 4 Scout and Gemma 4 26B-A4B)
and per simulated Blackwell GPU, :func:`gather` asks SGLang what it publishes with no flags,
runs the first MoE layer once as SGLang ships it (this patch suspended) and once with
``--moe-runner-backend flashinfer_cutlass`` (:mod:`..simulation.moe_forward`), and
:func:`.rule.evidence_of` says what that shows. ``verify`` gathers it and keeps the record
(:mod:`..evidence_records`); a server reads the record (:func:`current_facts`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sglang_nvfp4_patches.evidence_records import SHIPPED_NAME, Record, find_record
from sglang_nvfp4_patches.models import GEMMA4, LLAMA4
from sglang_nvfp4_patches.nvfp4_moe_runner import NAME
from sglang_nvfp4_patches.nvfp4_moe_runner.rule import (
    CUTLASS,
    EVIDENCE_GPUS,
    evidence_key,
    evidence_of,
)
from sglang_nvfp4_patches.simulation.moe_forward import SGLANG_SOURCES
from sglang_nvfp4_patches.status import sglang_version

SOURCES = SGLANG_SOURCES  # the sources its runs go through
SHIPPED = Path(__file__).with_name(SHIPPED_NAME)


def bundled_models() -> dict[str, Path]:
    from sglang_nvfp4_patches.simulation.bundled import GEMMA4_NVFP4_MOE, LLAMA4_NVFP4

    return {LLAMA4: LLAMA4_NVFP4, GEMMA4: GEMMA4_NVFP4_MOE}


def current_record() -> Record | None:
    """The record that matches the SGLang this process imported, if any."""
    return find_record(NAME, sglang_version(), SOURCES, SHIPPED)


def current_facts() -> dict[str, Any] | None:
    record = current_record()
    return None if record is None else dict(record.facts)


def gather_one(family: str, gpu: str) -> dict[str, Any]:
    """The evidence for one family on one simulated GPU (in a process where SGLang loaded
    the plugin: the other patches act as they would in a server)."""
    from sglang_nvfp4_patches.nvfp4_moe_runner.suspension import suspended
    from sglang_nvfp4_patches.simulation.gpus import GPU_PROFILES
    from sglang_nvfp4_patches.simulation.moe_forward import run_first_moe_layer
    from sglang_nvfp4_patches.simulation.server_args import resolve

    model_dir, profile = bundled_models()[family], GPU_PROFILES[gpu]
    with suspended():
        published = resolve(model_dir, profile).moe_runner_backend
        unpatched = None
        if published in (None, "auto"):
            unpatched = run_first_moe_layer(model_dir, profile)
    cutlass = None
    if unpatched is not None and unpatched.broken:
        cutlass = run_first_moe_layer(model_dir, profile, {"moe_runner_backend": CUTLASS})
    state, detail = evidence_of(
        published,
        None if unpatched is None else unpatched.as_json(),
        None if cutlass is None else cutlass.as_json(),
    )
    return {
        "state": state.value,
        "detail": detail,
        "published": published,
        "unpatched": None if unpatched is None else unpatched.as_json(),
        CUTLASS: None if cutlass is None else cutlass.as_json(),
    }


def gather() -> dict[str, Any]:
    """Every family on every simulated GPU the evidence covers."""
    return {
        evidence_key(family, gpu): gather_one(family, gpu)
        for family in bundled_models()
        for gpu in EVIDENCE_GPUS.values()
    }
