"""Which SGLang releases the plugin was tested on, and how any version string compares (pure:
no SGLang import).

This is the only place the plugin reads a version string. *What* gets patched is always
decided by probing the installed SGLang; the tested window only decides whether the patches
are applied without the user opting in (:mod:`.release_gate`).

The rule for a version ``V`` (PEP 440), with ``P`` its public part (a local label such as
``+gabc123`` is dropped: it names a build of ``P``, not newer code):

* tested when ``OLDEST_SUPPORTED <= P <= NEWEST_TESTED``. Pre-releases and dev builds of
  a tested release (``0.5.23rc1``, ``0.5.23.dev1``) sort before it and count as tested;
* newer when ``P > NEWEST_TESTED``: the next release and every build of SGLang's main made
  after the newest tested release (``0.5.24.dev3``, ``0.5.24rc1``, ``0.5.24.dev3+gabc123``),
  and post releases of the newest one (``0.5.23.post1``, ``0.5.23.post1.dev3+g...``), whose
  code nobody has run the probes on;
* older when ``P < OLDEST_SUPPORTED`` (``0.5.12rc0``, ``0.5.11``), unknown when it does not
  parse. Newer, older and unknown are all *untested*; the release gate still treats one whose
  sources are a tested release's as that release (:mod:`.release_gate`).
"""

from __future__ import annotations

import enum

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

OLDEST_SUPPORTED = "0.5.12"
# Every release on PyPI from OLDEST_SUPPORTED on: CI runs the release matrix and `verify` on each
# (.ci/run reads this tuple), so "tested" means run, not assumed.
TESTED_RELEASES: tuple[str, ...] = (
    "0.5.12",
    "0.5.12.post1",
    "0.5.13",
    "0.5.13.post1",
    "0.5.14",
    "0.5.15",
    "0.5.15.post1",
    "0.5.16",
    "0.5.17",
    "0.5.18",
    "0.5.19",
    "0.5.20",
    "0.5.21",
    "0.5.22",
    "0.5.23",
)
NEWEST_TESTED = str(max(Version(release) for release in TESTED_RELEASES))
# pyproject declares only the lower bound (installing must never downgrade the user's
# SGLang; scripts/check_wheel.py checks it); the upper bound lives here alone.
SUPPORTED_RANGE = f">={OLDEST_SUPPORTED},<={NEWEST_TESTED}"
SUPPORTED_SGLANG = SpecifierSet(SUPPORTED_RANGE)


class ReleaseStatus(str, enum.Enum):
    TESTED = "tested"
    NEWER = "newer than the newest tested release"
    OLDER = "older than the oldest supported release"
    UNKNOWN = "not a version this plugin can read"


def release_status(version: str) -> ReleaseStatus:
    try:
        public = Version(Version(version).public)
    except InvalidVersion:
        return ReleaseStatus.UNKNOWN
    if public > Version(NEWEST_TESTED):
        return ReleaseStatus.NEWER
    if public < Version(OLDEST_SUPPORTED):
        return ReleaseStatus.OLDER
    return ReleaseStatus.TESTED


def is_tested(version: str) -> bool:
    """Whether ``version`` is inside the tested window (the patches apply without opt-in)."""
    return release_status(version) is ReleaseStatus.TESTED


def untested_phrase(version: str) -> str:
    """``SGLang 0.5.24.dev0 is newer than the newest tested release (0.5.23)``, and so on."""
    status = release_status(version)
    if status is ReleaseStatus.NEWER:
        return f"SGLang {version} is newer than the newest tested release ({NEWEST_TESTED})"
    if status is ReleaseStatus.OLDER:
        return f"SGLang {version} is older than the oldest supported release ({OLDEST_SUPPORTED})"
    if status is ReleaseStatus.UNKNOWN:
        return f"SGLang version {version!r} is not a version this plugin can compare"
    return f"SGLang {version} is a tested release"
