"""When does a ModelOpt NVFP4 MoE checkpoint get ``flashinfer_cutlass`` published? (pure: no
SGLang, no torch)

SGLang's own rule picks ``flashinfer_cutlass`` for ``modelopt_fp4`` on SM110/SM120 (FlashInfer's
trtllm-gen MoE kernels are SM100-only), but it reads ``--quantization``, not the checkpoint's
quantization. With no flag the published MoE runner stays ``auto``; the ModelOpt NVFP4 method
then prepares its weights for one runner and builds another, and the layer fails at its first
forward (sglang#39807). On SM10X the Llama 4 layer fails the same way, and its TRT-LLM FP4
path scales expert outputs, never inputs, which Llama 4's router weight needs; the CUTLASS
runner with ``llama4-router-weight`` is the one shown to compute ``expert(x * w)``.

Whether that failure is live on this SGLang is not read off its code: it is **evidence**, one
forward through SGLang's own layer on a simulated GPU (:mod:`.evidence`), per model family and
GPU. This module turns that evidence and one launch's facts into the decision.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

CUTLASS = "flashinfer_cutlass"
NVFP4 = "modelopt_fp4"
AUTO = "auto"
# The GPUs the evidence is gathered on (simulated profiles) and the capability each stands for.
EVIDENCE_GPUS: dict[tuple[int, int], str] = {
    (10, 0): "sm100",
    (10, 3): "sm103",
    (12, 0): "sm120",
    (12, 1): "sm121",
}
# Layer verdicts (simulation.moe_forward.LayerVerdict values) that mean the server fails or
# answers wrong with that layer, and the one that means it serves.
BROKEN_VERDICTS = frozenset({"fails", "no kernel", "wrong"})
SERVES = "serves"
OTHER_KERNEL = "other kernel"


class EvidenceState(str, enum.Enum):
    """What the evidence says about one model family on one GPU, launched with no flags."""

    LIVE = "live"  # SGLang's own layer fails there, and on flashinfer_cutlass it serves
    UPSTREAM = "upstream"  # SGLang's own layer serves: nothing to fix
    NOT_AFFECTED = "not affected"  # SGLang publishes a runner itself, or runner and weights agree
    NO_REMEDY = "no remedy"  # SGLang's own layer fails there, and on flashinfer_cutlass too
    UNKNOWN = "unknown"  # the simulation could not tell


def evidence_key(family: str, gpu: str) -> str:
    return f"{family} on {gpu}"


def evidence_of(
    published: str | None, unpatched: Mapping[str, Any] | None, cutlass: Mapping[str, Any] | None
) -> tuple[EvidenceState, str]:
    """The state and its reason from what the simulation saw: the runner SGLang ``published``
    with no flags, the layer run as SGLang ships it (``unpatched``: runner, verdict, detail)
    and the same launch with ``--moe-runner-backend flashinfer_cutlass`` (``cutlass``)."""
    if published not in (None, AUTO):
        return EvidenceState.NOT_AFFECTED, f"SGLang publishes {published} itself"
    if unpatched is None:
        return EvidenceState.UNKNOWN, "the simulation built no layer"
    runner, verdict, detail = unpatched["runner"], unpatched["verdict"], unpatched["detail"]
    on_runner = f"on the {runner} runner it builds" if runner else "with no runner"
    if verdict == SERVES:
        return EvidenceState.UPSTREAM, f"SGLang's own layer serves {on_runner}: {detail}"
    if verdict == OTHER_KERNEL:
        return (
            EvidenceState.NOT_AFFECTED,
            f"with the runner left at auto the layer's weights and kernel agree ({detail})",
        )
    if verdict not in BROKEN_VERDICTS:
        return EvidenceState.UNKNOWN, f"SGLang's own layer {on_runner}: {verdict}, {detail}"
    failure = f"SGLang's own layer fails {on_runner} {detail}"
    if cutlass is None:
        return EvidenceState.UNKNOWN, f"{failure}, and with {CUTLASS} no layer was built"
    if cutlass["verdict"] in BROKEN_VERDICTS:
        return (
            EvidenceState.NO_REMEDY,
            f"{failure}, and with {CUTLASS} it fails too, {cutlass['detail']}",
        )
    if cutlass["verdict"] != SERVES:
        return EvidenceState.UNKNOWN, f"{failure}, and with {CUTLASS}: {cutlass['detail']}"
    return EvidenceState.LIVE, f"{failure}, and with {CUTLASS} it serves: {cutlass['detail']}"


@dataclass(frozen=True)
class LaunchFacts:
    """One launch, as resolution sees it when model overrides run."""

    family: str | None  # "Llama 4" / "Gemma 4" MoE, else None
    quantization: str | None  # the quantization resolution has so far (--quantization)
    runner: str | None  # the MoE runner backend resolution has so far
    capability: tuple[int, int] | None  # the GPU's, None off CUDA
    # What SGLang detects from the checkpoint (it builds the model config: asked last)
    checkpoint_quantization: Callable[[], str | None]


@dataclass(frozen=True)
class Decision:
    runner: str | None  # the MoE runner backend to publish, or None: leave SGLang's
    reason: str
    state: EvidenceState | None = None  # the evidence consulted, if any


def _gpu_name(capability: tuple[int, int]) -> str:
    return f"SM{capability[0]}{capability[1]}"


Evidence = Mapping[str, Any]


def decide(facts: LaunchFacts, evidence: Callable[[], Evidence | None]) -> Decision:
    """Publish ``flashinfer_cutlass`` for this launch, or leave SGLang's runner. ``evidence()``
    (asked only when the launch needs it) maps :func:`evidence_key` to ``{"state": ...,
    "detail": ...}``, or is ``None`` where this SGLang has no record."""
    if facts.family is None:
        return Decision(None, "not a Llama 4 or Gemma 4 MoE checkpoint")
    if facts.quantization is not None:
        return Decision(None, f"--quantization {facts.quantization} is given: SGLang decides")
    if facts.runner not in (None, AUTO):
        return Decision(None, f"the MoE runner backend is already {facts.runner}")
    if facts.capability is None:
        return Decision(None, "not a CUDA GPU")
    gpu = EVIDENCE_GPUS.get(facts.capability)
    if gpu is None:
        return Decision(None, f"{_gpu_name(facts.capability)} is not a GPU this patch simulates")
    if facts.checkpoint_quantization() != NVFP4:
        return Decision(None, "not a ModelOpt NVFP4 checkpoint")
    record = evidence()
    if record is None:
        return Decision(None, "no verified record for this SGLang", EvidenceState.UNKNOWN)
    found = record.get(evidence_key(facts.family, gpu))
    if not isinstance(found, Mapping):
        return Decision(None, f"the record has no {facts.family} evidence", EvidenceState.UNKNOWN)
    state = EvidenceState(found["state"])
    if state is EvidenceState.LIVE:
        return Decision(CUTLASS, found["detail"], state)
    return Decision(None, found["detail"], state)
