"""Whether the patches are applied on this SGLang, and what to say where they are not (pure).

They apply inside the tested window (:mod:`.supported_releases`), on a version whose sources
are a tested release's, or with ``SGLANG_NVFP4_PATCHES_UNTESTED=apply``; otherwise the probes
run read-only, and ``doctor``, ``explain`` and the server log say where a bug is live.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from sglang_nvfp4_patches.settings import UNTESTED_ENV, InvalidUntestedError, untested_opt_in
from sglang_nvfp4_patches.supported_releases import is_tested, untested_phrase

VERIFY_COMMAND = "sglang-nvfp4-patches verify"


@dataclass(frozen=True)
class ReleaseGate:
    version: str
    tested: bool  # by its version, or by its sources (same_sources_as)
    opted_in: bool
    opt_in_error: str = ""  # an invalid SGLANG_NVFP4_PATCHES_UNTESTED value, explained
    # Where the version is untested: the tested release whose sources it has.
    same_sources_as: str = ""

    @property
    def applies(self) -> bool:
        """Whether the patches are applied (by feature, exactly as on a tested release)."""
        return self.tested or self.opted_in

    def not_patched_because(self) -> str:
        """Why a live bug is left unpatched here, and how to opt in."""
        why = f"not patched because {untested_phrase(self.version)}"
        if self.opt_in_error:
            return f"{why} and {self.opt_in_error}"
        return (
            f"{why}; run `{VERIFY_COMMAND}`, then set {UNTESTED_ENV}=apply to apply it as on a "
            "tested release"
        )

    def sources_note(self) -> str:
        """Why an untested version with a tested release's sources is tested here."""
        return f"its sources equal tested release {self.same_sources_as}'s"

    def opt_in_note(self) -> str:
        """What ``doctor`` adds to a patch applied outside the window."""
        return f"applied on untested SGLang {self.version} by opt-in ({UNTESTED_ENV}=apply)"


def release_gate(
    version: str,
    environ: Mapping[str, str] | None = None,
    sources_of: Callable[[], str | None] = lambda: None,
) -> ReleaseGate:
    """The gate for SGLang ``version``; ``sources_of`` (asked only where it is untested) names
    the tested release whose sources this SGLang has."""
    same_sources_as = "" if is_tested(version) else sources_of() or ""
    tested = is_tested(version) or bool(same_sources_as)
    try:
        opted_in = untested_opt_in(environ)
    except InvalidUntestedError as error:
        return ReleaseGate(version, tested, False, str(error), same_sources_as)
    return ReleaseGate(version, tested, opted_in and not tested, "", same_sources_as)


@functools.cache
def this_gate() -> ReleaseGate:
    """The gate of the SGLang this process imports, read once."""
    from sglang_nvfp4_patches.release_facts import release_with_these_sources
    from sglang_nvfp4_patches.supported_releases import sglang_version

    return release_gate(sglang_version(), sources_of=release_with_these_sources)
