"""What a patch is: the one :class:`Patch` each patch package's ``__init__`` builds from its
own functions (pure: no SGLang, no torch). The commands iterate
:data:`~sglang_nvfp4_patches.patches.PATCHES` and never name a patch, so a new patch is one
package and one line in ``patches.py``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sglang_nvfp4_patches.patch_report import PatchReport
from sglang_nvfp4_patches.server_args_seam.question import fields_asked_by

if TYPE_CHECKING:
    from sglang_nvfp4_patches.check_result import CheckResult


def no_runner_lifts(refusal: str) -> bool:
    return False


@dataclass(frozen=True)
class Patch:
    name: str  # what users type (SGLANG_NVFP4_PATCHES_DISABLE / _FORCE) and doctor prints
    # the models it concerns (explain's rows and notes); None: every architecture
    architectures: frozenset[str] | None
    # plugin: wire the patch in (forced: even where the root cause is fixed); observe: wire
    # nothing, probe read-only and say where the bug is live
    install: Callable[[bool, bool], PatchReport]
    state: Callable[[], PatchReport]  # doctor: what SGLang holds now
    unpatched: Callable[[], PatchReport]  # doctor: the probes, read-only, nothing patched
    # explain: the note on a row of the patch's, given its MoE runner and MoE quantization
    explain_note: Callable[[str | None, str | None], str]
    verify_checks: Callable[[], list[CheckResult]]  # verify: every check, plugin loaded
    # release facts: the cells CI settles by running this SGLang's code on CPU (its columns)
    release_facts: Callable[[], Mapping[str, str]] | None = None
    # explain's unpatched column: inside this block the patch acts on nothing
    suspended: Callable[[], AbstractContextManager[None]] = contextlib.nullcontext
    # explain: whether another MoE runner may serve a layer refused with this refusal
    runner_may_lift: Callable[[str], bool] = no_runner_lifts
    not_forceable_because: str = ""  # why SGLANG_NVFP4_PATCHES_FORCE refuses it; "": it may

    @property
    def declares(self) -> frozenset[str]:
        """The ServerArgs fields its questions may declare (explain's "decided by")."""
        return fields_asked_by(self.name)

    def concerns(self, architecture: str | None) -> bool:
        """Whether an ``explain`` row of ``architecture`` is one of this patch's."""
        return self.architectures is None or architecture in self.architectures
