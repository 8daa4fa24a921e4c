"""Which SGLang releases the plugin was tested on, and how any version string compares (pure:
no SGLang import): it decides whether the patches apply without opt-in (:mod:`.release_gate`),
never what is patched. A version is tested when the public part of it (a local ``+gabc123``
names a build of it) lies from ``OLDEST_SUPPORTED`` to ``NEWEST_TESTED``; all else is untested.
"""

from __future__ import annotations

import enum
import importlib.metadata

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
    if status is ReleaseStatus.UNKNOWN:
        return f"SGLang version {version!r} is not a version this plugin can compare"
    if status is ReleaseStatus.TESTED:
        return f"SGLang {version} is a tested release"
    bound = NEWEST_TESTED if status is ReleaseStatus.NEWER else OLDEST_SUPPORTED
    return f"SGLang {version} is {status.value} ({bound})"


def sglang_version() -> str:
    """Version of the installed SGLang, from its dist-info (cheap: ``sglang.__version__``
    imports torch). An overlay on PYTHONPATH comes first on sys.path, so its version wins."""
    return dist_version("sglang")


def dist_version(name: str) -> str:
    """An installed distribution's version, or ``not installed``."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"
