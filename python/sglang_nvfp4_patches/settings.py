"""Environment settings of the plugin (pure: no SGLang import)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from sglang_nvfp4_patches.errors import UsageError
from sglang_nvfp4_patches.patch_names import NOT_FORCEABLE_BECAUSE, PATCH_NAMES

DISABLE_ENV = "SGLANG_NVFP4_PATCHES_DISABLE"
FORCE_ENV = "SGLANG_NVFP4_PATCHES_FORCE"
UNTESTED_ENV = "SGLANG_NVFP4_PATCHES_UNTESTED"
RECORDS_ENV = "SGLANG_NVFP4_PATCHES_RECORDS"
UNTESTED_APPLY = "apply"  # the one value that applies the patches on an untested release
# Only a patch whose rule can be applied where its root cause is fixed can be forced; each
# other patch says why not (``patch_names.NOT_FORCEABLE_BECAUSE``).
FORCEABLE_PATCHES: tuple[str, ...] = tuple(
    name for name in PATCH_NAMES if name not in NOT_FORCEABLE_BECAUSE
)


class UnknownPatchNameError(ValueError):
    """``SGLANG_NVFP4_PATCHES_DISABLE`` names a patch this plugin does not have."""


class InvalidForceError(ValueError):
    """``SGLANG_NVFP4_PATCHES_FORCE`` names a patch that does not exist or cannot be forced."""


class InvalidUntestedError(ValueError):
    """``SGLANG_NVFP4_PATCHES_UNTESTED`` holds something other than ``apply``."""


def _names(environ: Mapping[str, str] | None, variable: str) -> tuple[str, set[str]]:
    raw = (os.environ if environ is None else environ).get(variable, "")
    return raw, {part.strip() for part in raw.split(",") if part.strip()}


def disabled_patches(environ: Mapping[str, str] | None = None) -> frozenset[str]:
    """Patch names switched off by ``SGLANG_NVFP4_PATCHES_DISABLE`` (comma-separated).

    An unknown name is an error rather than a silent no-op: a typo would otherwise leave
    the patch on while the operator believes it is off.
    """
    raw, names = _names(environ, DISABLE_ENV)
    unknown = sorted(names - set(PATCH_NAMES))
    if unknown:
        raise UnknownPatchNameError(
            f"{DISABLE_ENV}={raw!r} names unknown patch(es) {', '.join(unknown)}; "
            f"known patches are {', '.join(PATCH_NAMES)} (comma-separated)."
        )
    return frozenset(names)


def forced_patches(environ: Mapping[str, str] | None = None) -> frozenset[str]:
    """Patch names whose rule ``SGLANG_NVFP4_PATCHES_FORCE`` applies even where SGLang has
    fixed the root cause (comma-separated). Any name that is unknown or not forceable makes
    the whole value invalid: forcing half of what the operator wrote would surprise them."""
    raw, names = _names(environ, FORCE_ENV)
    unknown = sorted(names - set(PATCH_NAMES))
    if unknown:
        raise InvalidForceError(
            f"{FORCE_ENV}={raw!r} names unknown patch(es) {', '.join(unknown)}; only "
            f"{', '.join(FORCEABLE_PATCHES)} can be forced. Nothing is forced."
        )
    refused = sorted(names - set(FORCEABLE_PATCHES))
    if refused:
        because = "; ".join(
            because for name, because in NOT_FORCEABLE_BECAUSE.items() if name in refused
        )
        raise InvalidForceError(
            f"{FORCE_ENV}={raw!r}: {', '.join(refused)} cannot be forced ({because}); "
            f"only {', '.join(FORCEABLE_PATCHES)} can be forced. Nothing is forced."
        )
    return frozenset(names)


def untested_opt_in(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``SGLANG_NVFP4_PATCHES_UNTESTED=apply`` asks for the patches on a release
    outside the tested window. Unset or empty is no; any other value is an error rather than
    a guess (``1`` or ``yes`` could mean either)."""
    raw = (os.environ if environ is None else environ).get(UNTESTED_ENV, "")
    if raw.strip() in ("", UNTESTED_APPLY):
        return raw.strip() == UNTESTED_APPLY
    raise InvalidUntestedError(
        f"{UNTESTED_ENV}={raw!r} is not understood; the only value is {UNTESTED_APPLY!r} "
        "(unset it to leave an untested SGLang unpatched)"
    )


def check_environment(environ: Mapping[str, str] | None = None) -> None:
    """The variables this plugin reads, checked first by ``explain``, ``doctor`` and
    ``verify``: a wrong value is a UsageError naming it, never a failed check of SGLang."""
    env = os.environ if environ is None else environ
    try:
        disabled_patches(env), forced_patches(env), untested_opt_in(env)
    except (UnknownPatchNameError, InvalidForceError, InvalidUntestedError) as error:
        raise UsageError(str(error)) from None
    given = env.get(RECORDS_ENV)
    if not given:
        return
    path = Path(given).absolute()
    try:
        with contextlib.suppress(FileNotFoundError):
            os.stat(path)  # too long, a file on the way, a directory that cannot be searched
        existing = next(p for p in (path, *path.parents) if os.path.lexists(p))
        handle, probe = tempfile.mkstemp(prefix=".write-probe-", dir=existing)  # then removed
        os.close(handle)
        os.unlink(probe)
    except OSError as error:
        raise UsageError(
            f"{RECORDS_ENV}={given!r}: {error.strerror} ({error.filename or path}); point it at "
            "a directory this user can write (a missing one is made), or unset it"
        ) from None
