"""What a patch is: the one declaration each patch package makes (pure: no SGLang, no torch).

The commands (``plugin``, ``doctor``, ``explain``, ``verify``, ``settings``, ``cli``) iterate
:data:`~sglang_nvfp4_patches.patches.PATCHES`, never name a patch and import nothing of a patch
package: a new patch is one package whose ``__init__`` calls :func:`declare`, and one line in
``patches.py``.

A patch provides these functions, each named in its declaration as ``module.function`` inside
its package and imported on its first call (so importing a declaration imports neither SGLang
nor torch). Their signatures are the protocols below; ``test_patch_declarations.py`` resolves
every name of every declaration and checks its parameters against them.

==================  =====================================================  =================
declaration field   signature                                              called by
==================  =====================================================  =================
``install``         ``(forced: bool, observe: bool) -> PatchReport``       ``plugin``
``state``           ``() -> PatchReport``                                  ``doctor``
``unpatched``       ``() -> PatchReport``                                  ``doctor``
``explain_note``    ``(moe_runner, moe_quantization) -> str``              ``explain``
``verify_checks``   ``() -> list[CheckResult]``                            ``verify``
``suspended``       ``() -> AbstractContextManager[None]`` (optional)      ``explain``
``runner_may_lift`` ``(refusal: str) -> bool`` (optional)                  ``explain``
==================  =====================================================  =================

A patch that decides from an evidence record (:mod:`.evidence_records`) also provides
``current_record`` (:class:`CurrentRecord`) in the module
:data:`~.patch_names.EVIDENCE_MODULES` names for it: where the version is untested, the release
gate asks each (:func:`record_readers`), below the patches, so not through a declaration.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from sglang_nvfp4_patches.patch_names import EVIDENCE_MODULES, NOT_FORCEABLE_BECAUSE
from sglang_nvfp4_patches.status import PatchReport

if TYPE_CHECKING:
    from sglang_nvfp4_patches.check_result import CheckResult
    from sglang_nvfp4_patches.evidence_records import Record


class Install(Protocol):
    """Wire the patch in (``forced``: even where its root cause is fixed; only a forceable
    patch is ever forced). ``observe``: on an untested release without the opt-in, wire
    nothing, only probe (read-only, also as SGLang imports the code) and say where the bug is
    live."""

    def __call__(self, forced: bool, observe: bool) -> PatchReport: ...


class ReadState(Protocol):
    """``state``: what SGLang holds now, read back. ``unpatched``: where nothing is patched,
    the probes read-only: ``not patched`` (the bug is live here), ``already upstream`` or not
    applicable."""

    def __call__(self) -> PatchReport: ...


class ExplainNote(Protocol):
    """The note on an ``explain`` row of one of the patch's architectures, given the MoE
    runner the row ends on and the quantization SGLang detects for the row's MoE checkpoint
    (``None``: not a Llama 4 or Gemma 4 MoE checkpoint, or not quantized)."""

    def __call__(self, moe_runner: str | None, moe_quantization: str | None) -> str: ...


class VerifyChecks(Protocol):
    """Every ``verify`` check of the patch, run in a fresh process where SGLang loaded the
    plugin with every patch switched on."""

    def __call__(self) -> list[CheckResult]: ...


class Suspended(Protocol):
    """Inside this block the patch acts on nothing (``explain``'s unpatched column)."""

    def __call__(self) -> AbstractContextManager[None]: ...


class RunnerMayLift(Protocol):
    """Whether another MoE runner may serve a layer the patch refused with ``refusal``
    (``explain`` then tries each runner SGLang offers)."""

    def __call__(self, refusal: str) -> bool: ...


def no_runner_lifts(refusal: str) -> bool:
    return False


class CurrentRecord(Protocol):
    """The evidence record of the patch that matches the SGLang this process imported, shipped
    or kept by ``verify`` (``None``: none matches)."""

    def __call__(self) -> Record | None: ...


@dataclass(frozen=True)
class Lazy:
    """``module.function``, imported on the first call."""

    module: str
    function: str

    def resolve(self) -> Callable[..., Any]:
        return getattr(importlib.import_module(self.module), self.function)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.resolve()(*args, **kwargs)


@dataclass(frozen=True)
class Patch:
    name: str  # what users type (SGLANG_NVFP4_PATCHES_DISABLE / _FORCE) and doctor prints
    # the models it concerns (explain's rows and notes); None: every architecture
    architectures: frozenset[str] | None
    install: Install
    state: ReadState
    unpatched: ReadState
    explain_note: ExplainNote
    verify_checks: VerifyChecks
    suspended: Suspended = contextlib.nullcontext
    runner_may_lift: RunnerMayLift = no_runner_lifts
    # The ServerArgs fields it may declare during resolution (explain's "decided by").
    declares: frozenset[str] = frozenset()
    # Why forcing it is refused (``patch_names.NOT_FORCEABLE_BECAUSE``); empty if it can be.
    not_forceable_because: str = ""

    @property
    def forceable(self) -> bool:
        return not self.not_forceable_because

    def concerns(self, architecture: str | None) -> bool:
        """Whether an ``explain`` row of ``architecture`` is one of this patch's."""
        return self.architectures is None or architecture in self.architectures


RECORD_FUNCTION = "current_record"  # in each of EVIDENCE_MODULES


def record_readers() -> tuple[CurrentRecord, ...]:
    """``current_record`` of each patch that decides from an evidence record."""
    return tuple(Lazy(module, RECORD_FUNCTION) for module in EVIDENCE_MODULES.values())


# Each field that names a function of the patch's package, and the protocol it follows.
PROTOCOLS: dict[str, type] = {
    "install": Install,
    "state": ReadState,
    "unpatched": ReadState,
    "explain_note": ExplainNote,
    "verify_checks": VerifyChecks,
    "suspended": Suspended,
    "runner_may_lift": RunnerMayLift,
}


def declare(
    package: str,
    *,
    name: str,
    architectures: frozenset[str] | None,
    install: str,
    state: str,
    unpatched: str,
    explain_note: str,
    verify_checks: str,
    suspended: str | None = None,
    runner_may_lift: str | None = None,
    declares: frozenset[str] = frozenset(),
) -> Patch:
    """The :class:`Patch` of ``package``; each function is named ``module.function`` inside
    the package (the protocols above say what it must take and return)."""

    def seam(dotted: str) -> Any:
        module, function = dotted.rsplit(".", 1)
        return Lazy(f"{package}.{module}", function)

    return Patch(
        name=name,
        architectures=architectures,
        install=seam(install),
        state=seam(state),
        unpatched=seam(unpatched),
        explain_note=seam(explain_note),
        verify_checks=seam(verify_checks),
        suspended=seam(suspended) if suspended else contextlib.nullcontext,
        runner_may_lift=seam(runner_may_lift) if runner_may_lift else no_runner_lifts,
        declares=declares,
        not_forceable_because=NOT_FORCEABLE_BECAUSE.get(name, ""),
    )
