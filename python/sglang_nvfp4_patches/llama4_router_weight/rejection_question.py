"""Does an NVFP4 MoE method still reject ``apply_router_weight_on_input`` on the FlashInfer
CUTLASS runner? (pure: ``ast`` and ``inspect`` on the objects it is given). The walker, asked
:mod:`.flag_question`, reads the method and ``create_moe_runner`` (run before the lift: any
read there is unknown); reading proves a rejection present, never absent.
"""

from __future__ import annotations

import enum
import inspect
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sglang_nvfp4_patches.llama4_router_weight.flag_free_view import FLAG
from sglang_nvfp4_patches.llama4_router_weight.flag_question import (
    CONFIG,
    SELF,
    FlagQuestion,
)
from sglang_nvfp4_patches.source_reader.flow_state import Env
from sglang_nvfp4_patches.source_reader.live_code import LiveCode
from sglang_nvfp4_patches.source_reader.walker import Walker

HOLDER = "moe_runner_config"  # where the method reads the flag (what the flag-free view hides)
CUTLASS = "flashinfer_cutlass"  # the runner the branches are decided for
TOP_K_ABOVE_1 = "only with top-k > 1"
# What code this reader trips over raises (names standing for each other in a circle, say).
BEYOND = (RecursionError, ValueError, TypeError, AttributeError)


class Verdict(str, enum.Enum):
    """What the code shows; only ``REJECTS`` is a conclusion (a half stands down only on
    behaviour, :mod:`.evidence`)."""

    REJECTS = "rejects"  # every read is a rejection the flag-free view lifts
    USES = "uses"  # the reader sees the flag read and used, no rejection
    DOES_NOT_READ = "does not read"  # the reader sees nothing that reads the flag
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Reading:
    verdict: Verdict
    found: tuple[str, ...]  # where: the rejections, the uses, or why unknown
    rejected_at: tuple[str, ...] = ()  # every rejection seen, whatever the verdict
    only_top_k_above_1: bool = False  # every rejection also needs top-k > 1

    @property
    def rejects(self) -> bool:
        return self.verdict is Verdict.REJECTS

    def summary(self) -> str:
        more = f" (and {len(self.found) - 1} more)" if len(self.found) > 1 else ""
        return f"{self.found[0]}{more}" if self.found else "nothing reads it"


def read_runner_function(
    function: Any, backends: Iterable[str], *, config_at: int = 2, package: str = "sglang"
) -> Reading:
    """What a runner's fused function does with the flag of the config it is handed, read as
    our wrapper hands it a flag-free view."""
    question = _question(backends, hidden=True)
    try:
        problem = _read(LiveCode(object, package), question, function, config_at, CONFIG)
    except BEYOND as error:
        problem = f"beyond this reader ({type(error).__name__}: {error})"
    return _conclude(question, problem)


def read_method(
    owner: type,
    method: str,
    backends: Iterable[str],
    *,
    before_lift: str = "create_moe_runner",
    package: str = "sglang",
) -> Reading:
    """What ``owner.method`` does with the flag on the CUTLASS runner, and whether
    ``owner.before_lift`` (run before the lift, with the real config) reads it at all; code
    this reader trips over is ``unknown``, never an error."""
    backends = frozenset(backends)  # asked twice
    try:
        question = _question(backends, hidden=True)
        problem = _method(owner, method, question, package)
        if problem is not None:
            return Reading(Verdict.UNKNOWN, (problem,))
        if inspect.getattr_static(owner, before_lift, None) is not None:
            early = _question(backends, hidden=False)
            problem = _method(owner, before_lift, early, package)
            late = [problem] if problem else []
            late += early.rejections + early.uses + early.found_unknown()
            question.unknown += [f"{before_lift}, run before the lift: {where}" for where in late]
        return _conclude(question)
    except BEYOND as error:
        why = f"{owner.__name__}.{method} is beyond this reader ({type(error).__name__}: {error})"
        return Reading(Verdict.UNKNOWN, (why,))


def _question(backends: Iterable[str], hidden: bool) -> FlagQuestion:
    """The flag read through ``self.moe_runner_config``, on the CUTLASS runner."""
    return FlagQuestion(HOLDER, FLAG, CUTLASS, frozenset(backends), "top_k", TOP_K_ABOVE_1, hidden)


def _read(
    code: LiveCode, question: FlagQuestion, function: Any, at: int, role: str, name: str = ""
) -> str | None:
    """Walk ``function``, its ``at``-th parameter standing for ``role``; why it cannot be read."""
    name = name or getattr(function, "__qualname__", repr(function))
    callee = code.callee(function, name=name)
    if callee.node is None:
        return callee.problem
    parameters = [*callee.node.args.posonlyargs, *callee.node.args.args]
    if len(parameters) <= at:
        return f"{name} takes no parameter {at + 1}"
    env = Env(context=callee.context)
    env.names[parameters[at].arg] = question.start(parameters[at], role)
    Walker(code, question).run(callee.node, env)
    return None


def _method(owner: type, name: str, question: FlagQuestion, package: str) -> str | None:
    """Walk ``owner.name``, ``self`` standing for itself; why it cannot be read."""
    function = inspect.getattr_static(owner, name, None)
    function = getattr(function, "__func__", function)
    if function is None:
        return f"{owner.__name__}.{name} not found"
    where = f"{owner.__name__}.{name}"
    return _read(LiveCode(owner, package), question, function, 0, SELF, where)


def _conclude(found: FlagQuestion, problem: str | None = None) -> Reading:
    rejected = tuple(found.rejections)
    unknown = found.found_unknown()
    if problem is not None:
        return Reading(Verdict.UNKNOWN, (problem,), rejected)
    if unknown:
        return Reading(Verdict.UNKNOWN, tuple(unknown), rejected)
    if found.rejections and found.uses:
        return Reading(
            Verdict.UNKNOWN,
            (f"both rejects it ({found.rejections[0]}) and uses it ({found.uses[0]})",),
            rejected,
        )
    if found.rejections:
        only_top_k = all(TOP_K_ABOVE_1 in where for where in rejected)
        return Reading(Verdict.REJECTS, rejected, rejected, only_top_k)
    if found.uses:
        return Reading(Verdict.USES, tuple(found.uses))
    return Reading(Verdict.DOES_NOT_READ, ())
