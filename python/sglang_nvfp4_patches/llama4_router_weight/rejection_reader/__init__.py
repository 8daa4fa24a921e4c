"""Does an NVFP4 MoE method still reject ``apply_router_weight_on_input`` on the FlashInfer
CUTLASS runner? Read from what its code does, not from how one release spells it (pure: ``ast``
and ``inspect`` on the objects it is given; it imports nothing of SGLang).

The reader walks the method the layer runs (``apply`` / ``apply_weights``) on the CUTLASS
branch: tests that name a runner backend (``backend.is_flashinfer_cutlass()``,
``self.enable_flashinfer_cutlass_moe``, ``self.use_flashinfer_trtllm``) are decided for the
CUTLASS runner, and code after a branch that returns is not reached. It follows what the
method calls in SGLang: helpers on ``self`` (base classes included, properties too),
``super()``, and module functions, with their parameters bound to what the call passes.
Local names stand for what they were assigned (``cfg = self.moe_runner_config``,
``on_input = cfg.apply_router_weight_on_input``, ``ok = not on_input``).

Each read of the flag is judged:

* a **rejection**: an ``assert`` that fails, or an ``if`` whose flag branch always raises
  (any exception type), when the flag is set, and passes when the method's config reads it
  as ``False``, through ``self.moe_runner_config`` (what the lift's flag-free view hides);
* a **use**: the flag decides something else, or is handed on to a callee;
* anything this reader cannot follow (a read through another object, a call it cannot read
  that is handed ``self`` or the config, the flag's name as a string) makes it ``unknown``.

``create_moe_runner`` is read too: it runs before the lift, so any read there is unknown.
Reading proves a rejection present, never absent: "uses" and "does not read" are what this
reader saw, not evidence that SGLang handles the flag (that is shown by behaviour,
:mod:`..evidence`).

The parts: :mod:`.frame` (what the reader holds: a frame's names, its findings),
:mod:`.truth` (what a node stands for, and its truth on the CUTLASS runner),
:mod:`.statements`, :mod:`.expressions` and :mod:`.calls` (which function a call runs, and
following it); :class:`Reader` joins them, :func:`read_method` and
:func:`read_runner_function` conclude.
"""

from __future__ import annotations

import enum
import inspect
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sglang_nvfp4_patches.llama4_router_weight.rejection_reader.calls import Calls
from sglang_nvfp4_patches.llama4_router_weight.rejection_reader.expressions import Expressions
from sglang_nvfp4_patches.llama4_router_weight.rejection_reader.frame import (
    BEYOND,
    UNREADABLE,
    Findings,
    Kind,
    source_of,
)
from sglang_nvfp4_patches.llama4_router_weight.rejection_reader.statements import (
    TOP_K_ABOVE_1,
    Statements,
)
from sglang_nvfp4_patches.llama4_router_weight.rejection_reader.truth import Truth


class Verdict(str, enum.Enum):
    """What the code shows. Only ``REJECTS`` is a conclusion: ``USES`` and ``DOES_NOT_READ``
    say what this reader found, never that the flag is handled (a spelling it cannot see reads
    the same); a half stands down only on behaviour (:mod:`..evidence`)."""

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


class Reader(Truth, Statements, Expressions, Calls):
    """The reader: :mod:`.truth`, :mod:`.statements`, :mod:`.expressions` and :mod:`.calls`
    over the state in :mod:`.frame`."""


def _read(reader: Reader, name: str, hidden: bool) -> str | None:
    """Walk ``reader.owner.name``; why it cannot be read, or ``None``."""
    function = inspect.getattr_static(reader.owner, name, None)
    function = getattr(function, "__func__", function)
    if function is None:
        return f"{reader.owner.__name__}.{name} not found"
    return _walk_function(reader, function, 0, Kind.SELF, hidden, f"{reader.owner.__name__}.{name}")


def _walk_function(
    reader: Reader,
    function: Any,
    position: int,
    kind: Kind,
    hidden: bool,
    name: str | None = None,
) -> str | None:
    """Walk ``function`` with its ``position``-th parameter standing for ``kind``; why it
    cannot be read, or ``None``."""
    name = name or getattr(function, "__qualname__", repr(function))
    try:
        tree, filename, first = source_of(function)
    except UNREADABLE as error:
        return f"cannot read {name} ({type(error).__name__}: {error})"
    parameters = [*tree.args.posonlyargs, *tree.args.args]
    if len(parameters) <= position:
        return f"{name} takes no parameter {position + 1}"
    frame = reader.frame(function, tree, hidden, filename, first)
    frame.bound[parameters[position].arg] = kind
    reader.walk(tree.body, frame)
    return None


def read_runner_function(
    function: Any, backends: Iterable[str], *, config_at: int = 2, package: str = "sglang"
) -> Reading:
    """What a runner's fused function (``(dispatch_output, quant_info, runner_config)``) does
    with the flag of the config it is handed, read as the plugin's wrapper hands it a view
    that reads the flag as ``False``."""
    reader = Reader(object, frozenset(backends), package)
    try:
        problem = _walk_function(reader, function, config_at, Kind.CONFIG, hidden=True)
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
        return _verdict(owner, method, frozenset(backends), before_lift, package)
    except BEYOND as error:
        why = f"{owner.__name__}.{method} is beyond this reader ({type(error).__name__}: {error})"
        return Reading(Verdict.UNKNOWN, (why,))


def _verdict(
    owner: type, method: str, backends: frozenset[str], before_lift: str, package: str
) -> Reading:
    reader = Reader(owner, backends, package)
    problem = _read(reader, method, hidden=True)
    if problem is not None:
        return Reading(Verdict.UNKNOWN, (problem,))
    found = reader.found
    if inspect.getattr_static(owner, before_lift, None) is not None:
        early = Reader(owner, backends, package)
        problem = _read(early, before_lift, hidden=False)
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
