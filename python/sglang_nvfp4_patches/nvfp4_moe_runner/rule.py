"""When does a ModelOpt NVFP4 MoE checkpoint get ``flashinfer_cutlass`` published? (pure: no
SGLang, no torch)

SGLang picks ``flashinfer_cutlass`` for ``modelopt_fp4`` on SM110/SM120 from ``--quantization``,
not the checkpoint's. With the runner left at ``auto`` the ModelOpt NVFP4 method prepares its
weights for one runner and builds another, and the layer fails at its first forward
(sglang#39807), in any architecture. Whether that is live is **evidence** (:mod:`.evidence`),
kept per MoE layer settings, GPU and launch line; a launch is decided by its own checkpoint's
facts and the runner resolution has so far, never by the model's name.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from sglang_nvfp4_patches.moe_layout import ONE_GPU, Layout, Registered, fate

NAME = "nvfp4-moe-runner"  # what users type (SGLANG_NVFP4_PATCHES_DISABLE) and doctor prints

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
# LayerVerdict values: those that mean the server fails or answers wrong, and it serves.
BROKEN_VERDICTS = frozenset({"fails", "no kernel", "wrong"})
SERVES = "serves"
OTHER_KERNEL = "other kernel"


class EvidenceState(str, enum.Enum):
    """What the evidence says of one MoE layer's settings on one GPU and launch line (each
    state's meaning: :data:`STATE_REASONS`)."""

    LIVE = "live"
    UPSTREAM = "upstream"
    NOT_AFFECTED = "not affected"
    NO_REMEDY = "no remedy"
    UNKNOWN = "unknown"
    NOT_COVERED = "not covered"


# The sentence a state stands for where the release facts (states only) give it.
STATE_REASONS: dict[EvidenceState, str] = {
    EvidenceState.LIVE: f"SGLang's own layer fails at the first forward, and with {CUTLASS} "
    "it serves",
    EvidenceState.UPSTREAM: "SGLang's own layer serves",
    EvidenceState.NOT_AFFECTED: "SGLang publishes a runner itself, or the layer's weights and "
    "kernel agree",
    EvidenceState.NO_REMEDY: f"SGLang's own layer fails, and with {CUTLASS} it fails too",
    EvidenceState.UNKNOWN: "the simulation could not tell",
    EvidenceState.NOT_COVERED: "no stand-in with these settings leaves the runner at auto here",
}

NO_QUANTIZATION = "no --quantization"


def launch_name(quantization: str | None) -> str:
    """The launch line's part that matters: ``no --quantization``, or the flag as given."""
    return NO_QUANTIZATION if quantization is None else f"--quantization {quantization}"


class EvidenceKey(NamedTuple):
    """One MoE layer's settings (:attr:`..models.MoeSettings.key`) on one GPU, launched one
    way; it reads ``silu, top-k on sm120, no --quantization``."""

    settings: str
    gpu: str
    launch: str

    def __str__(self) -> str:
        return f"{self.settings} on {self.gpu}, {self.launch}"


def evidence_of(
    published: str | None, unpatched: Mapping[str, Any] | None, cutlass: Mapping[str, Any] | None
) -> EvidenceState:
    """The state of what the simulation saw: the runner SGLang ``published``, the layer as
    SGLang ships it (``unpatched``) and with ``--moe-runner-backend flashinfer_cutlass``."""
    if published not in (None, AUTO):
        return EvidenceState.NOT_AFFECTED  # SGLang publishes a runner itself
    verdict = None if unpatched is None else unpatched["verdict"]
    if verdict == SERVES:
        return EvidenceState.UPSTREAM
    if verdict == OTHER_KERNEL:  # with the runner left at auto, the weights and kernel agree
        return EvidenceState.NOT_AFFECTED
    if verdict not in BROKEN_VERDICTS or cutlass is None:
        return EvidenceState.UNKNOWN
    if cutlass["verdict"] in BROKEN_VERDICTS:
        return EvidenceState.NO_REMEDY
    return EvidenceState.LIVE if cutlass["verdict"] == SERVES else EvidenceState.UNKNOWN


@dataclass(frozen=True)
class LaunchFacts:
    """One launch, as resolution sees it when model overrides run."""

    settings: str | None  # the MoE layer's settings key (MoeSettings.key), None: no MoE layer
    quantization: str | None  # the quantization resolution has so far (--quantization)
    runner: str | None  # the MoE runner backend resolution has so far
    capability: tuple[int, int] | None  # the GPU's, None off CUDA
    # What SGLang detects from the checkpoint (it builds the model config: asked last)
    checkpoint_quantization: Callable[[], str | None]
    layout: Layout = ONE_GPU
    # Asked only where the patch would act: the runner SGLang's whole resolution publishes
    # alone (None: auto); and for a launch across GPUs or with an all-to-all backend,
    # SGLang's fused-function registry (:mod:`.fused_functions`) and the layout dimensions
    # the release facts show.
    own_runner: Callable[[], str | None] = lambda: None
    registered: Registered = lambda _a2a, _runner: None
    runners_for: Callable[[str], tuple[str, ...] | None] = lambda _a2a: None
    shown: Callable[[], frozenset[str] | None] = lambda: None


# Per :class:`EvidenceKey`, what the evidence found: ``{"state", "detail"}``.
Evidence = Mapping[EvidenceKey, Mapping[str, Any]]


@dataclass(frozen=True)
class Decision:
    runner: str | None  # the MoE runner backend to publish, or None: leave SGLang's
    reason: str
    state: EvidenceState | None = None  # the evidence consulted, if any
    key: EvidenceKey | None = None  # the evidence key consulted
    # No runner this patch can publish serves the launch, but this launch line does
    instead: str | None = None
    # The launch's layout: its layer fails when it is built (why, and what works), or the
    # decision stands though the layout was not shown on CPU (which part)
    layout_refusal: str | None = None
    not_shown: str | None = None


# What a launch shows its layer serving with, or SGLang choosing a runner for it.
WORKING_STATES = frozenset({"live", "upstream", "not affected"})


def launch_that_works(record: Evidence, key: EvidenceKey) -> str | None:
    """Another launch line of the same settings and GPU shown serving (``--quantization``
    spellings first: the nearest change of the line)."""
    found = [
        other.launch
        for other, fact in record.items()
        if other[:2] == key[:2] and other != key and fact.get("state") in WORKING_STATES
    ]
    found.sort(key=lambda launch: launch == NO_QUANTIZATION)
    return found[0] if found else None


def refusal(decision: Decision, model_path: str, version: str, layout: Layout = ONE_GPU) -> str:
    """The message of a :class:`LaunchRefused`: what fails, and the launch that works."""
    settings, gpu, launch = decision.key or EvidenceKey("", "", "")
    if decision.layout_refusal is not None:
        return (
            f"{model_path}: launched with {layout.flags} on {gpu.upper()}, SGLang {version}'s "
            f"ModelOpt NVFP4 MoE layer ({settings}) fails when it is built: "
            f"{decision.layout_refusal}; refused before the weights load."
        )
    instead = f"with {decision.instead}"
    if decision.instead == NO_QUANTIZATION:
        instead = "without --quantization"
    return (
        f"{model_path}: launched with {launch} on {gpu.upper()}, SGLang {version}'s ModelOpt "
        f"NVFP4 MoE layer ({settings}) fails with every MoE runner this plugin can publish "
        f"({decision.reason}). Launch it {instead} instead (refused before the weights load)."
    )


def decide(facts: LaunchFacts, evidence: Callable[[], Evidence | None]) -> Decision:
    """Every behaviour of the patch for one launch: publish ``flashinfer_cutlass``, leave
    SGLang's runner, or refuse the launch (and the WARNING of a layout not shown on CPU).
    ``evidence()`` is asked only when needed. The one-GPU decision holds for a layout only where
    its runner has a fused function for the all-to-all backend (else the launch is refused)."""
    decision = _one_gpu(facts, evidence)
    if decision.state is not None and decision.instead is None and facts.layout.dimensions:
        own = facts.own_runner()  # the runner weighed is SGLang's own, where it publishes one
        runner = own if own is not None else decision.runner
        found = fate(facts.layout, runner, facts.registered, facts.runners_for, facts.shown())
        if found.failure is not None:
            refused = f"{found.failure}. {found.instead}"
            decision = replace(decision, runner=None, layout_refusal=refused)
        else:  # a WARNING concerns what the plugin publishes; SGLang's own runner is its call
            decision = replace(decision, not_shown=found.not_shown if decision.runner else None)
    if decision.runner is not None or decision.instead is not None:
        own = facts.own_runner()
        if own is not None:
            return Decision(None, f"SGLang publishes {own} itself")
    return decision


def _one_gpu(facts: LaunchFacts, evidence: Callable[[], Evidence | None]) -> Decision:
    if facts.runner not in (None, AUTO):
        return Decision(None, f"the MoE runner backend is already {facts.runner}")
    if facts.capability is None:
        return Decision(None, "not a CUDA GPU")
    gpu = EVIDENCE_GPUS.get(facts.capability)
    if gpu is None:
        major, minor = facts.capability
        return Decision(None, f"SM{major}{minor} is not a GPU this patch simulates")
    if facts.settings is None:
        return Decision(None, "not a MoE checkpoint")
    if facts.checkpoint_quantization() != NVFP4:
        return Decision(None, "not a ModelOpt NVFP4 checkpoint")
    launch = launch_name(facts.quantization)
    record = evidence()
    if record is None:
        return Decision(None, "no verified record for this SGLang", EvidenceState.UNKNOWN)
    if launch not in {key.launch for key in record}:
        return Decision(None, f"{launch} is given, a launch the evidence does not concern")
    key = EvidenceKey(facts.settings, gpu, launch)
    found = record.get(key)
    if not isinstance(found, Mapping):
        return Decision(
            None,
            f"the evidence has no MoE layer with {facts.settings}",
            EvidenceState.NOT_COVERED,
            key,
        )
    state = EvidenceState(found["state"])
    if state is EvidenceState.LIVE:
        return Decision(CUTLASS, found["detail"], state, key)
    if state is EvidenceState.NO_REMEDY:
        return Decision(None, found["detail"], state, key, launch_that_works(record, key))
    return Decision(None, found["detail"], state, key)
