"""What a patch is: the one declaration each patch package makes (pure: no SGLang, no torch).

``plugin``, ``doctor``, ``explain`` and ``settings`` iterate over :data:`patches.PATCHES` and
never name a patch. Each declaration points at its package's SGLang-facing functions by
module name, so importing it imports neither SGLang nor torch: the function's module is
imported when the function is first called. :func:`declare` finds them under one convention:
``install``, ``current_state``, ``unpatched_report`` and ``explain_note`` in the package's
``state`` module.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from sglang_nvfp4_patches.status import PatchReport


def lazy(module: str, function: str) -> Callable[..., Any]:
    """``module.function``, imported on the first call."""

    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(importlib.import_module(module), function)(*args, **kwargs)

    call.__qualname__ = f"{module}.{function}"
    return call


@dataclass(frozen=True)
class Patch:
    name: str  # what users type (SGLANG_NVFP4_PATCHES_DISABLE / _FORCE) and doctor prints
    architectures: frozenset[str]  # the models it concerns (explain's rows and notes)
    # ``install()``, ``install(forced=True)``, or ``install(observe=True)``: on an untested
    # release without the opt-in, only probe (read-only) as SGLang imports the code, and
    # record where the bug is live.
    install: Callable[..., PatchReport]
    state: Callable[[], PatchReport]  # doctor: what SGLang holds now, read back
    # doctor on an untested release without the opt-in: the probes, read-only, with nothing
    # patched: ``not patched`` (the bug is live here), ``already upstream`` or not applicable.
    unpatched: Callable[[], PatchReport]
    # explain: the note for a row of one of its architectures, given the row's MoE runner.
    explain_note: Callable[[str | None], str]
    # Inside this block the patch declares nothing (explain's unpatched column).
    suspended: Callable[[], AbstractContextManager[None]] = contextlib.nullcontext
    # Why forcing it is refused; empty for a patch that can be forced.
    not_forceable_because: str = ""

    @property
    def forceable(self) -> bool:
        return not self.not_forceable_because


def declare(
    package: str,
    *,
    name: str,
    architectures: frozenset[str],
    state: str = "state.current_state",
    suspended: str | None = None,
    not_forceable_because: str = "",
) -> Patch:
    """The :class:`Patch` of ``package``, whose functions follow the convention (module doc);
    ``state`` and ``suspended`` name others as ``module.function`` inside the package."""

    def seam(dotted: str) -> Callable[..., Any]:
        module, function = dotted.rsplit(".", 1)
        return lazy(f"{package}.{module}", function)

    return Patch(
        name=name,
        architectures=architectures,
        install=seam("state.install"),
        state=seam(state),
        unpatched=seam("state.unpatched_report"),
        explain_note=seam("state.explain_note"),
        suspended=seam(suspended) if suspended else contextlib.nullcontext,
        not_forceable_because=not_forceable_because,
    )
