"""Each release boundary a test relies on (``support.release``) is one CI can show wrong: the
release that first ships the feature and the tested release just before it both run the
release matrix, and CI runs every release of ``TESTED_RELEASES``."""

from __future__ import annotations

import pytest
from packaging.version import Version

from sglang_nvfp4_patches.supported_releases import TESTED_RELEASES
from support.release import BOUNDARIES, NO_CPU_KERNEL_RELEASES

ORDERED = sorted(TESTED_RELEASES, key=Version)


@pytest.mark.parametrize("first_release", BOUNDARIES)
def test_a_boundary_is_a_tested_release_with_a_tested_one_before_it(first_release: str) -> None:
    assert first_release in TESTED_RELEASES
    assert ORDERED.index(first_release) > 0, f"nothing older than {first_release} runs in CI"


def test_every_release_a_test_singles_out_is_tested() -> None:
    assert set(NO_CPU_KERNEL_RELEASES) <= set(TESTED_RELEASES)
