"""Which SGLang releases the plugin patches (pure: no SGLang import).

The range is only a guard against releases nobody has tested the probes on; *what* gets
patched is always decided by probing the installed SGLang, never by the version string.
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

# pyproject declares only the lower bound (installing must never downgrade the user's
# SGLang, scripts/check_wheel.py checks it); the upper bound lives here alone: a newer
# release is left unpatched with one WARNING, and doctor says why.
SUPPORTED_RANGE = ">=0.5.12,<0.5.24"
SUPPORTED_SGLANG = SpecifierSet(SUPPORTED_RANGE)
TESTED_RELEASES: tuple[str, ...] = (
    "0.5.12.post1",
    "0.5.13",
    "0.5.14",
    "0.5.15.post1",
    "0.5.18",
    "0.5.20",
    "0.5.22",
    "0.5.23",
)


def is_supported(version: str) -> bool:
    try:
        return SUPPORTED_SGLANG.contains(Version(version), prereleases=True)
    except InvalidVersion:
        return False
