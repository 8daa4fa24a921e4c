"""What a patch is: the one declaration each patch package makes (pure: no SGLang, no torch).

The commands iterate :data:`~sglang_nvfp4_patches.patches.PATCHES` and never name a patch: a
new patch is one package whose ``__init__`` calls :func:`declare`, and one line in
``patches.py``. Its functions are named ``module.function`` and imported on their first call;
``test_patch_declarations.py`` checks them against the protocols below.

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
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from sglang_nvfp4_patches.patch_names import NOT_FORCEABLE_BECAUSE
from sglang_nvfp4_patches.status import PatchReport

if TYPE_CHECKING:
    from sglang_nvfp4_patches.check_result import CheckResult


class Install(Protocol):
    """Wire the patch in (``forced``: even where its root cause is fixed). ``observe``: wire
    nothing, only probe read-only and say where the bug is live."""

    def __call__(self, forced: bool, observe: bool) -> PatchReport: ...


class ReadState(Protocol):
    """``state``: what SGLang holds now. ``unpatched``: the probes read-only, where nothing is
    patched."""

    def __call__(self) -> PatchReport: ...


class ExplainNote(Protocol):
    """The note on an ``explain`` row of the patch's, given the row's MoE runner and MoE
    quantization (``None``: not MoE, or not quantized)."""

    def __call__(self, moe_runner: str | None, moe_quantization: str | None) -> str: ...


class VerifyChecks(Protocol):
    """Every ``verify`` check, run where SGLang loaded the plugin with every patch on."""

    def __call__(self) -> list[CheckResult]: ...


class Suspended(Protocol):
    """Inside this block the patch acts on nothing (``explain``'s unpatched column)."""

    def __call__(self) -> AbstractContextManager[None]: ...


class RunnerMayLift(Protocol):
    """Whether another MoE runner may serve a layer refused with ``refusal`` (``explain``)."""

    def __call__(self, refusal: str) -> bool: ...


def no_runner_lifts(refusal: str) -> bool:
    return False


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

    def concerns(self, architecture: str | None) -> bool:
        """Whether an ``explain`` row of ``architecture`` is one of this patch's."""
        return self.architectures is None or architecture in self.architectures


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
    """The :class:`Patch` of ``package``; each function is ``module.function`` inside it."""

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
