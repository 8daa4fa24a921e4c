"""Every decision of ``llama4-router-weight``, in one function (pure: no SGLang, no torch).

:func:`decide` answers, from this SGLang's release facts (what CI, or ``verify`` on this machine,
saw SGLang's own layers do on CPU: :mod:`.evidence`; ``None`` on an untested release) and, for a
layer being built, what SGLang has fixed about it: does the runner get our pre-scale, is each
method's check lifted, is this layer refused. The hooks only carry out its answer. Reading code
could prove a rejection present, never absent, so nothing here reads SGLang's code.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping

from sglang_nvfp4_patches.llama4_router_weight.flag_free_view import FLAG
from sglang_nvfp4_patches.llama4_router_weight.refusals import (
    FP4_ALLGATHER_REMEDY,
    LiftedLayerWrongError,
    RouterWeightOnInputError,
    lifted_wrong_message,
    nvfp4_dispatch_remedy,
    prequantized_refusal,
    served_instead,
    top_k_refusal,
    wrapper_refusal,
)
from sglang_nvfp4_patches.patch_report import PatchState
from sglang_nvfp4_patches.release_gate import VERIFY_COMMAND

CUTLASS = "flashinfer_cutlass"  # the MoE runner backend this patch acts on
RUNNER_MODULE = f"sglang.srt.layers.moe.moe_runner.{CUTLASS}"

NAME = "llama4-router-weight"  # what users type (SGLANG_NVFP4_PATCHES_DISABLE) and doctor prints


class Part(enum.Enum):
    """One half of the patch; its value is its release-facts column."""

    RUNNER = "l4:runner"
    MODELOPT = "l4:modelopt"
    COMPRESSED_TENSORS = "l4:compressed-tensors"

    @property
    def key(self) -> str:
        """``runner``, ``modelopt``, ``compressed-tensors``: in logs and ``verify``'s words."""
        return self.value.split(":", 1)[1]


class Shown(enum.Enum):
    """What a part's layer did on CPU: its value as ``verify`` says it, and its sentence (the
    last two are the runner's)."""

    UPSTREAM = "upstream", "SGLang's own layer serves top-1 with the flag"
    OTHER_RUNNER = "other runner", "SGLang's own layer runs on another runner"
    LIFT_SERVES = "lift serves", "SGLang's own layer fails with the flag; lifted, it serves"
    LIFTED_WRONG = "lifted, wrong", "lifted, the layer computes something other than expert(x*w)"
    FAILS = "fails", "the layer fails with the flag, lifted or not"
    NOT_SHOWN = "not shown", "no layer shows it serving the flag"
    NOT_APPLICABLE = "not applicable", "this release has no FlashInfer CUTLASS runner module"

    sentence: str

    def __new__(cls, value: str, sentence: str) -> Shown:
        member = object.__new__(cls)
        member._value_ = value
        member.sentence = sentence
        return member

    @property
    def cell(self) -> str:
        return self.value.replace(", ", "-").replace(" ", "-")


SERVING = (Shown.UPSTREAM, Shown.LIFT_SERVES)  # the method's layer serves on the CUTLASS runner


@dataclasses.dataclass(frozen=True)
class RejectingMethod:
    """An NVFP4 MoE method (a whole class) that rejects the flag on its CUTLASS branch."""

    part: Part
    label: str
    module: str
    cls: str
    checked_in: str  # the method that holds the check

    @property
    def target(self) -> str:
        return f"{self.module}.{self.cls}.create_moe_runner"


MODELOPT = RejectingMethod(
    Part.MODELOPT,
    "ModelOpt NVFP4",
    "sglang.srt.layers.quantization.modelopt_quant",
    "ModelOptNvFp4FusedMoEMethod",
    "apply",
)
COMPRESSED_TENSORS = RejectingMethod(
    Part.COMPRESSED_TENSORS,
    "compressed-tensors NVFP4",
    "sglang.srt.layers.quantization.compressed_tensors.schemes.compressed_tensors_w4a4_nvfp4_moe",
    "CompressedTensorsW4A4Nvfp4MoE",
    "apply_weights",
)
REJECTING_METHODS: tuple[RejectingMethod, ...] = (MODELOPT, COMPRESSED_TENSORS)


@dataclasses.dataclass(frozen=True)
class Facts:
    """This SGLang's row of release facts, as far as this patch reads it."""

    release: str
    made_by: str
    shown: Mapping[Part, Shown]
    # per method shown computing wrong lifted: the releases whose shipped rows show it serving
    serving: Mapping[Part, tuple[str, ...]] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class LayerFacts:
    """One MoE layer built with the flag on the CUTLASS runner."""

    method: str  # the NVFP4 MoE method (class name) whose rejection is lifted
    wrapper: str | None  # the quant method in front of it, when it is not the layer's own
    top_k: int | None  # experts per token; None where the release cannot say at build time
    fp4_allgather: bool  # activations quantized to FP4 before the DP all-gather
    nvfp4_dispatch: bool  # activations quantized to NVFP4 by the all-to-all dispatch
    dispatch_type_flag: bool  # the release sets that dtype with --flashinfer-a2a-dispatch-type
    runner_prescaled: bool  # our pre-scale wraps every CUTLASS fused function here


@dataclasses.dataclass(frozen=True)
class Answer:
    """What a part does: ``act`` (the runner: our pre-scale wraps SGLang's fused functions; a
    method: its check is lifted), its state and reason, ``doctor``'s note, and the error a layer
    raises when it is built."""

    act: bool
    state: PatchState
    reason: str
    note: str
    refusal: RouterWeightOnInputError | None = None
    live: tuple[PatchState, str] | None = None  # where it acts, but nothing is patched

    @property
    def unpatched(self) -> tuple[PatchState, str]:
        """The state and reason where nothing is patched: the bug live, unknown, or not there."""
        return self.live or (self.state, self.reason)


def shown_by(facts: Facts | None) -> str:
    return "no record" if facts is None else f"shown on CPU by {facts.made_by}"


NOT_HONOURED = (
    "not lifted: the FlashInfer CUTLASS runner does not honour apply_router_weight_on_input "
    "here (its CUTLASS fused functions still reject it); lifting the method's check would weight "
    "the expert output instead of the input, so SGLang's own check stays"
)


def decide(facts: Facts | None, part: Part, layer: LayerFacts | None = None) -> Answer:
    """What ``part`` does on the SGLang ``facts`` describe (``None``: no row); with a ``layer``
    of a method being built, whether that layer is refused (``refusal``) or lifted (``act``)."""
    if part is Part.RUNNER:
        return _runner(facts)
    answer = _method(facts, next(m for m in REJECTING_METHODS if m.part is part))
    if layer is None or not answer.act:
        return answer
    refusal = refusal_for(layer) or answer.refusal
    if refusal is not None:
        return dataclasses.replace(answer, refusal=refusal)
    if _runner(facts).act and not layer.runner_prescaled:
        return Answer(False, PatchState.FAILED, NOT_HONOURED, "not lifted")
    return answer


def _runner(facts: Facts | None) -> Answer:
    """Our pre-scale wraps the runner unless SGLang's own is shown serving the flag."""
    shown = None if facts is None else facts.shown.get(Part.RUNNER)
    if shown is Shown.UPSTREAM:
        why = f"{RUNNER_MODULE}'s registered fused function pre-scales top-1 itself"
        return Answer(False, PatchState.ALREADY_UPSTREAM, f"{why} ({shown_by(facts)})", "upstream")
    if shown is None:
        problem = (
            "no record shows its registered fused function pre-scaling top-1 on this SGLang "
            f"(`{VERIFY_COMMAND}` records it)"
        )
        whether = "cannot tell whether the CUTLASS runner applies the router weight by itself"
        live = PatchState.UNKNOWN, f"{whether} ({problem})"
    else:
        problem = f"its registered fused function does not serve the flag ({shown.sentence})"
        own = "the CUTLASS runner has no working top-1 pre-scale of its own"
        live = PatchState.NOT_PATCHED, f"{own} ({problem})"
    prescale = "FlashInfer CUTLASS fused functions pre-scale top-1 router weights on the input"
    return Answer(True, PatchState.APPLIED, f"{prescale} ({problem})", problem, live=live)


def _method(facts: Facts | None, method: RejectingMethod) -> Answer:
    """The method's check is lifted unless its own layer is shown serving (or failing either
    way); where the lifted layer is shown computing wrong, every layer is refused."""
    shown = None if facts is None else facts.shown.get(method.part)
    evidence = f"{shown.sentence if shown else None}; {shown_by(facts)}"
    live = (PatchState.NOT_PATCHED, f"{method.cls}.{method.checked_in} still rejects {FLAG}")
    if shown in (Shown.UPSTREAM, Shown.OTHER_RUNNER):
        how = (
            "serves" if shown is Shown.UPSTREAM else "does not run on the FlashInfer CUTLASS runner"
        )
        reason = f"{method.cls}'s own layer {how} with top-1 and {FLAG} ({evidence})"
        return Answer(
            False, PatchState.ALREADY_UPSTREAM, reason, f"none in this release ({reason})"
        )
    if shown is Shown.FAILS:
        reason = f"the {method.label} layer fails with top-1 and {FLAG}, lifted or not ({evidence})"
        return Answer(False, PatchState.FAILED, f"{reason}; left as SGLang ships it", "not lifted")
    if shown is Shown.LIFT_SERVES:
        reason = f"{method.cls} no longer rejects {FLAG} on the CUTLASS runner ({evidence})"
        return Answer(True, PatchState.APPLIED, reason, "lifted", live=live)
    if facts is None or shown is not Shown.LIFTED_WRONG:  # untested: lifted, safe either way
        reason = (
            f"cannot tell whether {method.cls}.{method.checked_in} still rejects {FLAG}: no record "
            "shows SGLang's own layer serving top-1 with the flag"
        )
        return Answer(True, PatchState.UNKNOWN, reason, "cannot tell")
    here = [m.label for m in REJECTING_METHODS if facts.shown.get(m.part) in SERVING]
    elsewhere = tuple(r for r in facts.serving.get(method.part, ()) if r != facts.release)
    served = served_instead(method.label, facts.release, elsewhere, here)
    message = lifted_wrong_message(method.cls, facts.release, evidence, served)
    reason = (
        f"lifted, {method.cls} computes something other than expert(x*w) ({evidence}); {served}"
    )
    note = f"refused when the layer is built ({reason})"
    return Answer(True, PatchState.APPLIED, reason, note, LiftedLayerWrongError(message), live)


def refusal_for(facts: LayerFacts) -> RouterWeightOnInputError | None:
    """What the pre-scale cannot make exact for this layer, naming the switch (``None``: lift)."""
    if facts.wrapper is not None:
        return wrapper_refusal(facts.wrapper, facts.method)
    if facts.top_k is not None and facts.top_k != 1:
        return top_k_refusal(facts.top_k)
    if facts.fp4_allgather:
        return prequantized_refusal(FP4_ALLGATHER_REMEDY)
    if facts.nvfp4_dispatch:
        return prequantized_refusal(nvfp4_dispatch_remedy(facts.dispatch_type_flag))
    return None
