"""Seam 2: the NVFP4 MoE methods that reject the flag on their CUTLASS branch.

An AROUND hook on each method's ``create_moe_runner`` lets SGLang build the runner with the
real config, then decides for the layer (:mod:`.rule`): refuse it, naming the switch, or hand
the method a flag-free view for its own check while the ``MoeRunner`` keeps the real config.
Whether a release still rejects is :func:`decide`d from the release facts, else read from
the method's code (:mod:`.rejection_question`).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

from sglang_nvfp4_patches.llama4_router_weight import outcomes
from sglang_nvfp4_patches.llama4_router_weight.flag_free_view import (
    without_router_weight_on_input,
)
from sglang_nvfp4_patches.llama4_router_weight.layer_facts import layer_facts
from sglang_nvfp4_patches.llama4_router_weight.refusals import (
    LiftedLayerWrongError,
    lifted_wrong_message,
    served_instead,
)
from sglang_nvfp4_patches.llama4_router_weight.rejecting_methods import (
    REJECTING_METHODS,
    RejectingMethod,
)
from sglang_nvfp4_patches.llama4_router_weight.rule import refusal_for
from sglang_nvfp4_patches.llama4_router_weight.runner_registry import (
    require_flag_free_views,
    runner_backends,
    runner_problem,
)
from sglang_nvfp4_patches.llama4_router_weight.suspension import is_method_lift_suspended
from sglang_nvfp4_patches.release_gate import VERIFY_COMMAND
from sglang_nvfp4_patches.sglang_hooks import bound_at, hook_count, install_hook
from sglang_nvfp4_patches.status import PatchState, PatchUnavailable

if TYPE_CHECKING:
    from sglang_nvfp4_patches.llama4_router_weight.rejection_question import Reading
    from sglang_nvfp4_patches.release_facts import Row


def runs_on_cutlass(method: Any) -> bool:
    backend = getattr(getattr(method, "runner", None), "runner_backend", None)
    is_cutlass = getattr(backend, "is_flashinfer_cutlass", None)
    if callable(is_cutlass):
        return bool(is_cutlass())
    return bool(getattr(method, "enable_flashinfer_cutlass_moe", False))


def rejecting_method_of(method: Any) -> RejectingMethod | None:
    """The rejecting method ``method`` is an instance of (a subclass counts)."""
    names = {cls.__name__ for cls in type(method).__mro__}
    return next((rejecting for rejecting in REJECTING_METHODS if rejecting.cls in names), None)


NO_REJECTION = "none in this release"
NOT_HONOURED = (
    "not lifted: the FlashInfer CUTLASS runner does not honour apply_router_weight_on_input "
    "here ({problem}); lifting the method's check would weight the expert output instead of "
    "the input, so SGLang's own check stays"
)


def create_moe_runner_hook(
    original: Callable[..., Any], method: Any, *args: Any, **kwargs: Any
) -> Any:
    """After SGLang builds the runner: refuse this layer, or lift the method's own check where
    the runner honours the flag."""
    result = original(method, *args, **kwargs)
    if is_method_lift_suspended():
        return result
    config = getattr(method, "moe_runner_config", None)
    if config is not None and config.apply_router_weight_on_input and runs_on_cutlass(method):
        layer = args[0] if args else kwargs.get("layer")
        refusal = refusal_for(layer_facts(layer, method, config)) or lifted_wrong_here(method)
        if refusal is not None:
            raise refusal
        problem = runner_problem()
        if problem is not None:
            rejecting = rejecting_method_of(method)
            part = rejecting.part if rejecting is not None else type(method).__name__
            outcomes.record(part, PatchState.FAILED, NOT_HONOURED.format(problem=problem))
            return result
        method.moe_runner_config = without_router_weight_on_input(config)
    return result


@functools.cache
def reading_of(rejecting: RejectingMethod, method_cls: type) -> Reading:
    """What ``rejecting``'s method does with the flag on the CUTLASS runner, read from its code."""
    from sglang_nvfp4_patches.llama4_router_weight.rejection_question import read_method

    return read_method(method_cls, rejecting.checked_in, runner_backends())


@dataclasses.dataclass(frozen=True)
class MethodDecision:
    """What this SGLang's method gets: state and reason, doctor's note, whether it is hooked."""

    state: PatchState
    reason: str
    note: str
    lift: bool
    refusal: str | None = None  # why each layer is refused when it is built, if it is


def still_rejects(rejecting: RejectingMethod, reading: Reading | None = None) -> str:
    what = "apply_router_weight_on_input"
    if reading is not None and reading.rejects and reading.only_top_k_above_1:
        what += " with top-k > 1 (top-1 passes its check)"
    return f"{rejecting.cls}.{rejecting.checked_in} still rejects {what}"


def _fact(row: Row | None, part: str) -> dict[str, Any] | None:
    from sglang_nvfp4_patches.llama4_router_weight.evidence import facts_of

    return None if row is None else (facts_of(row) or {}).get(part)


def decide(
    rejecting: RejectingMethod,
    read: Callable[[], Reading],
    record: Row | None,
    serving: tuple[str, ...] = (),
) -> MethodDecision:
    """Stand down where the row shows SGLang's own layer serving (or on another runner); refuse
    every layer where it shows the lifted one wrong (naming what serves: ``serving`` releases
    and other methods here); else lift, saying so where the code ``read`` shows no rejection."""
    # imported here: plugin load never reads a record
    from sglang_nvfp4_patches.llama4_router_weight.evidence import (
        FAILS,
        LIFT_SERVES,
        LIFTED_WRONG,
        OTHER_RUNNER,
        SERVING,
        UPSTREAM,
        shown_by,
    )

    fact = _fact(record, rejecting.part) or {}
    state = fact.get("state")
    evidence = f"{fact.get('detail')}; {shown_by(record)}"
    lifted = f"{rejecting.cls} no longer rejects apply_router_weight_on_input on the CUTLASS runner"
    if state in (UPSTREAM, OTHER_RUNNER):
        how = "serves" if state == UPSTREAM else "does not run on the FlashInfer CUTLASS runner"
        reason = (
            f"{rejecting.cls}'s own layer {how} with top-1 and apply_router_weight_on_input "
            f"({evidence})"
        )
        return MethodDecision(
            PatchState.ALREADY_UPSTREAM, reason, f"{NO_REJECTION} ({reason})", False
        )
    if state == LIFT_SERVES:
        return MethodDecision(PatchState.APPLIED, f"{lifted} ({evidence})", "lifted", True)
    if record is not None and state == LIFTED_WRONG:
        here = [
            other.label
            for other in REJECTING_METHODS
            if (_fact(record, other.part) or {}).get("state") in SERVING
        ]
        elsewhere = tuple(release for release in serving if release != record.release)
        served = served_instead(rejecting.label, record.release, elsewhere, here)
        reason = (
            f"lifted, {rejecting.cls} computes something other than expert(x*w) ({evidence}); "
            f"{served}"
        )
        refusal = lifted_wrong_message(rejecting.cls, record.release, evidence, served)
        note = f"refused when the layer is built ({reason})"
        return MethodDecision(PatchState.APPLIED, reason, note, True, refusal)
    if state == FAILS:
        reason = (
            f"the {rejecting.label} layer fails with top-1 and apply_router_weight_on_input, "
            f"lifted or not ({evidence}); left as SGLang ships it"
        )
        return MethodDecision(PatchState.FAILED, reason, "not lifted", False)
    # the reader runs only where no row tells (a server with a row imports none of it)
    from sglang_nvfp4_patches.llama4_router_weight.rejection_question import Verdict

    reading = read()
    if reading.rejects:
        reason = f"{lifted} (it rejected it: {reading.summary()})"
        return MethodDecision(PatchState.APPLIED, reason, "lifted", True)
    what = "the reader finds nothing that reads the flag"
    if reading.verdict is Verdict.UNKNOWN:
        what = f"it {reading.summary()}"
    elif reading.verdict is Verdict.USES:
        what = f"the reader finds no rejection (it uses the flag: {reading.summary()})"
    reason = (
        f"cannot tell whether {rejecting.cls}.{rejecting.checked_in} still rejects "
        f"apply_router_weight_on_input: {what}, which proves nothing, and no "
        f"record shows SGLang's own layer serving top-1 with the flag; run `{VERIFY_COMMAND}`"
    )
    return MethodDecision(PatchState.UNKNOWN, reason, "cannot tell", True)


def decision_for(rejecting: RejectingMethod, method_cls: type) -> MethodDecision:
    """:func:`decide` for the installed SGLang."""
    from sglang_nvfp4_patches.llama4_router_weight.evidence import current_row, releases_serving

    read = functools.partial(reading_of, rejecting, method_cls)
    return decide(rejecting, read, current_row(), releases_serving(rejecting.part))


def decision_here(rejecting: RejectingMethod) -> MethodDecision:
    """:func:`decision_for` ``rejecting``'s method as the installed SGLang defines it."""
    method_cls = getattr(importlib.import_module(rejecting.module), rejecting.cls)
    return decision_for(rejecting, method_cls)


def lifted_wrong_here(method: Any) -> LiftedLayerWrongError | None:
    """The refusal of ``method``'s layers where the row shows them, lifted, computing wrong."""
    rejecting = rejecting_method_of(method)
    refusal = None if rejecting is None else decision_for(rejecting, type(method)).refusal
    return None if refusal is None else LiftedLayerWrongError(refusal)


def is_lifted(rejecting: RejectingMethod) -> bool:
    return hook_count(bound_at(rejecting.target), create_moe_runner_hook) == 1


def method_patcher(rejecting: RejectingMethod, apply: bool = True) -> Callable[[ModuleType], None]:
    """Import callback: hook ``rejecting``'s method (``apply=False``: only record it)."""

    def patch_module(module: ModuleType) -> None:
        method_cls = getattr(module, rejecting.cls, None)
        try:
            if method_cls is None or not hasattr(method_cls, "create_moe_runner"):
                raise PatchUnavailable(f"{rejecting.target} not found")
            decision = decision_for(rejecting, method_cls)
            if decision.lift:
                require_flag_free_views()
        except PatchUnavailable as error:
            outcomes.record(rejecting.part, PatchState.FAILED, str(error))
            return
        if not decision.lift or (decision.state is PatchState.UNKNOWN and not apply):
            outcomes.record(rejecting.part, decision.state, decision.reason)
            return
        if not apply:
            live = still_rejects(rejecting, reading_of(rejecting, method_cls))
            outcomes.record(rejecting.part, PatchState.NOT_PATCHED, live)
            return
        install_hook(rejecting.target, create_moe_runner_hook)
        outcomes.record(rejecting.part, decision.state, decision.reason)

    patch_module.__qualname__ = f"patch_{rejecting.part.replace('-', '_')}_module"
    return outcomes.reported_as(rejecting.part)(patch_module)
