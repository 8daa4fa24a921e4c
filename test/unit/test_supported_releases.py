"""The supported-release guard (no SGLang import)."""

from __future__ import annotations

import pytest

from sglang_nvfp4_patches.supported_releases import TESTED_RELEASES, is_supported


@pytest.mark.parametrize("version", TESTED_RELEASES)
def test_every_tested_release_is_supported(version: str) -> None:
    assert is_supported(version)


@pytest.mark.parametrize(
    "version", ["0.5.11", "0.5.12rc0", "0.5.10.post1", "0.5.24", "0.6.0", "junk", ""]
)
def test_outside_the_range(version: str) -> None:
    assert not is_supported(version)


@pytest.mark.parametrize("version", ["0.5.12", "0.5.12.post1", "0.5.13", "0.5.13.post1"])
def test_releases_with_the_live_root_cause_are_supported(version: str) -> None:
    """0.5.12.x/0.5.13.x still drop the FP8 KV-cache V scale: their users get the warning."""
    assert is_supported(version)


def test_post_releases_and_dev_builds_inside_the_range() -> None:
    assert is_supported("0.5.20.post2")
    assert is_supported("0.5.23.dev1")


@pytest.mark.parametrize(
    ("version", "supported"),
    [("0.5.22rc1", True), ("0.5.14.dev20260601", True), ("0.5.24rc0", False)],
)
def test_pre_releases_count_as_the_release_they_lead_to(version: str, supported: bool) -> None:
    """A release candidate or nightly of a supported release is supported; of 0.5.24 is not."""
    assert is_supported(version) is supported
