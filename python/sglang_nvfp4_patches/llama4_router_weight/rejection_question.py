"""Does an NVFP4 MoE method still reject ``apply_router_weight_on_input`` on the FlashInfer
CUTLASS runner? Read from what its code does, not from how one release spells it (pure: ``ast``
and ``inspect`` on the objects it is given; it imports nothing of SGLang).

The guard reading of :mod:`sglang_nvfp4_patches.source_reader` (how it walks, follows calls
and judges each read of the flag: :mod:`~sglang_nvfp4_patches.source_reader.guard_reader`)
reads the method the layer runs (``apply`` / ``apply_weights``) on the CUTLASS runner, for the
flag as the method reads it through ``self.moe_runner_config``: what the lift's flag-free view
hides, so a rejection there is one the lift can stand down.

``create_moe_runner`` is read too: it runs before the lift, so any read there is unknown.
Reading proves a rejection present, never absent: "uses" and "does not read" are what this
reader saw, not evidence that SGLang handles the flag (that is shown by behaviour,
:mod:`.evidence`).

This module is the question: what is read (the flag, its holder, the runner), and the verdict
over what the reading found.
"""

from __future__ import annotations

import enum
import inspect
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sglang_nvfp4_patches.llama4_router_weight.flag_free_view import FLAG
from sglang_nvfp4_patches.source_reader.frame import BEYOND, Findings, Role, Subject
from sglang_nvfp4_patches.source_reader.guard_reader import GuardReader

CONFIG = "moe_runner_config"  # where the method reads the flag (what the flag-free view hides)
CUTLASS = "flashinfer_cutlass"  # the runner the branches are decided for
TOP_K_ABOVE_1 = "only with top-k > 1"


class Verdict(str, enum.Enum):
    """What the code shows. Only ``REJECTS`` is a conclusion: ``USES`` and ``DOES_NOT_READ``
    say what this reader found, never that the flag is handled (a spelling it cannot see reads
    the same); a half stands down only on behaviour (:mod:`.evidence`)."""

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
    """What a runner's fused function (``(dispatch_output, quant_info, runner_config)``) does
    with the flag of the config it is handed, read as the plugin's wrapper hands it a view
    that reads the flag as ``False``."""
    reader = GuardReader(object, _subject(backends), package)
    try:
        problem = reader.read_function(function, config_at, Role.CONFIG, hidden=True)
    except BEYOND as error:
        problem = f"beyond this reader ({type(error).__name__}: {error})"
    return _conclude(reader.found, problem)


def read_method(
    owner: type,
    method: str,
    backends: Iterable[str],
    *,
    before_lift: str = "create_moe_runner",
    package: str = "sglang",
) -> Reading:
    """What ``owner.method`` does with the flag on the CUTLASS runner, and whether
    ``owner.before_lift`` (run before the lift, with the real config) reads it at all;
    ``backends`` are this release's MoE runner backend values. Code this reader trips over
    (names that stand for each other in a circle, say) is ``unknown``, never an error."""
    try:
        return _verdict(owner, method, _subject(backends), before_lift, package)
    except BEYOND as error:
        why = f"{owner.__name__}.{method} is beyond this reader ({type(error).__name__}: {error})"
        return Reading(Verdict.UNKNOWN, (why,))


def _subject(backends: Iterable[str]) -> Subject:
    return Subject(CONFIG, FLAG, CUTLASS, frozenset(backends), "top_k", TOP_K_ABOVE_1)


def _verdict(owner: type, method: str, subject: Subject, before_lift: str, package: str) -> Reading:
    reader = GuardReader(owner, subject, package)
    problem = reader.read(method, hidden=True)
    if problem is not None:
        return Reading(Verdict.UNKNOWN, (problem,))
    found = reader.found
    if inspect.getattr_static(owner, before_lift, None) is not None:
        early = GuardReader(owner, subject, package)
        problem = early.read(before_lift, hidden=False)
        late = [problem] if problem else []
        late += early.found.rejections + early.found.uses + early.found.unknown
        found.unknown += [f"{before_lift}, run before the lift: {where}" for where in late]
    return _conclude(found)


def _conclude(found: Findings, problem: str | None = None) -> Reading:
    rejected = tuple(found.rejections)
    if problem is not None:
        return Reading(Verdict.UNKNOWN, (problem,), rejected)
    if found.unknown:
        return Reading(Verdict.UNKNOWN, tuple(found.unknown), rejected)
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
