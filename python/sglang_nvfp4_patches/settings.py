"""Environment settings of the plugin (pure: no SGLang import); the variables that name patches
are read against the patch list the caller passes."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from sglang_nvfp4_patches.errors import UsageError
from sglang_nvfp4_patches.write_probe import probe_write

if TYPE_CHECKING:
    from sglang_nvfp4_patches.patch import Patch

DISABLE_ENV = "SGLANG_NVFP4_PATCHES_DISABLE"
FORCE_ENV = "SGLANG_NVFP4_PATCHES_FORCE"
UNTESTED_ENV = "SGLANG_NVFP4_PATCHES_UNTESTED"
RECORDS_ENV = "SGLANG_NVFP4_PATCHES_RECORDS"
UNTESTED_APPLY = "apply"  # the one value that applies the patches on an untested release


class UnknownPatchNameError(ValueError):
    """``SGLANG_NVFP4_PATCHES_DISABLE`` names a patch this plugin does not have."""


class InvalidForceError(ValueError):
    """``SGLANG_NVFP4_PATCHES_FORCE`` names a patch that does not exist or cannot be forced."""


class InvalidUntestedError(ValueError):
    """``SGLANG_NVFP4_PATCHES_UNTESTED`` holds something other than ``apply``."""


def _names(environ: Mapping[str, str] | None, variable: str) -> tuple[str, set[str]]:
    raw = (os.environ if environ is None else environ).get(variable, "")
    return raw, {part.strip() for part in raw.split(",") if part.strip()}


def disabled_patches(
    patches: Sequence[Patch], environ: Mapping[str, str] | None = None
) -> frozenset[str]:
    """Patch names switched off by ``SGLANG_NVFP4_PATCHES_DISABLE``; an unknown one is an error."""
    raw, names = _names(environ, DISABLE_ENV)
    if not names:
        return frozenset()
    known = [patch.name for patch in patches]
    unknown = sorted(names - set(known))
    if unknown:
        raise UnknownPatchNameError(
            f"{DISABLE_ENV}={raw!r} names unknown patch(es) {', '.join(unknown)}; "
            f"known patches are {', '.join(known)} (comma-separated)."
        )
    return frozenset(names)


def forced_patches(
    patches: Sequence[Patch], environ: Mapping[str, str] | None = None
) -> frozenset[str]:
    """Patch names whose rule ``SGLANG_NVFP4_PATCHES_FORCE`` applies even where SGLang fixed
    the root cause (comma-separated); any unknown or unforceable name invalidates the value."""
    raw, names = _names(environ, FORCE_ENV)
    if not names:
        return frozenset()
    known = [patch.name for patch in patches]
    not_forceable = {p.name: p.not_forceable_because for p in patches if p.not_forceable_because}
    forceable = ", ".join(name for name in known if name not in not_forceable)
    unknown = sorted(names - set(known))
    if unknown:
        raise InvalidForceError(
            f"{FORCE_ENV}={raw!r} names unknown patch(es) {', '.join(unknown)}; only "
            f"{forceable} can be forced. Nothing is forced."
        )
    refused = [name for name in known if name in names and name in not_forceable]
    if refused:
        because = "; ".join(not_forceable[name] for name in refused)
        raise InvalidForceError(
            f"{FORCE_ENV}={raw!r}: {', '.join(refused)} cannot be forced ({because}); "
            f"only {forceable} can be forced. Nothing is forced."
        )
    return frozenset(names)


def untested_opt_in(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``SGLANG_NVFP4_PATCHES_UNTESTED=apply`` (unset: no; anything else: an error)."""
    raw = (os.environ if environ is None else environ).get(UNTESTED_ENV, "")
    if raw.strip() in ("", UNTESTED_APPLY):
        return raw.strip() == UNTESTED_APPLY
    raise InvalidUntestedError(
        f"{UNTESTED_ENV}={raw!r} is not understood; the only value is {UNTESTED_APPLY!r} "
        "(unset it to leave an untested SGLang unpatched)"
    )


def check_environment(patches: Sequence[Patch], environ: Mapping[str, str] | None = None) -> None:
    """The variables this plugin reads: a wrong value is a UsageError naming it."""
    env = os.environ if environ is None else environ
    try:
        disabled_patches(patches, env), forced_patches(patches, env), untested_opt_in(env)
    except (UnknownPatchNameError, InvalidForceError, InvalidUntestedError) as error:
        raise UsageError(str(error)) from None
    given = env.get(RECORDS_ENV)
    if not given:
        return
    path = Path(given).absolute()
    try:
        is_dir = stat.S_ISDIR(os.stat(path).st_mode)  # too long, a file on the way, unsearchable
    except FileNotFoundError:
        is_dir = True  # made when first needed
    except OSError as error:
        raise _records_refused(given, error.strerror, path) from None
    if not is_dir:
        raise _records_refused(given, os.strerror(errno.ENOTDIR), path)
    existing = next(p for p in (path, *path.parents) if os.path.lexists(p))
    try:
        probe_write(existing)
    except OSError as error:
        raise _records_refused(given, error.strerror, existing) from None


def _records_refused(given: str, what: str | None, where: Path) -> UsageError:
    return UsageError(
        f"{RECORDS_ENV}={given!r}: {what} ({where}); point it at a directory this user can "
        "write (a missing one is made), or unset it"
    )
