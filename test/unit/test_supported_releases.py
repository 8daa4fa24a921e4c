"""The tested window and the rule for any version string (no SGLang import)."""

from __future__ import annotations

import pytest

from sglang_nvfp4_patches.release_gate import ReleaseGate, release_gate
from sglang_nvfp4_patches.supported_releases import (
    NEWEST_TESTED,
    TESTED_RELEASES,
    ReleaseStatus,
    is_tested,
    release_status,
    untested_phrase,
)


@pytest.mark.parametrize("version", TESTED_RELEASES)
def test_every_tested_release_is_tested(version: str) -> None:
    assert is_tested(version)


def test_the_newest_tested_release_is_the_last_one_listed() -> None:
    assert NEWEST_TESTED == TESTED_RELEASES[-1] == "0.5.23"


@pytest.mark.parametrize(
    ("version", "status"),
    [
        # builds of SGLang's main after the newest tested release, and its next releases
        ("0.5.24.dev0", ReleaseStatus.NEWER),
        ("0.5.24.dev3", ReleaseStatus.NEWER),
        ("0.5.24rc1", ReleaseStatus.NEWER),
        ("0.5.24.dev3+gabc123", ReleaseStatus.NEWER),
        ("0.5.24", ReleaseStatus.NEWER),
        ("0.6.0", ReleaseStatus.NEWER),
        # post releases of the newest one carry code nobody ran the probes on
        ("0.5.23.post1", ReleaseStatus.NEWER),
        ("0.5.23.post1.dev3+gabc123", ReleaseStatus.NEWER),
        # a local label names a build of that release; pre-releases come before it
        ("0.5.23+gabc123", ReleaseStatus.TESTED),
        ("0.5.23rc1", ReleaseStatus.TESTED),
        ("0.5.23.dev1", ReleaseStatus.TESTED),
        ("0.5.20.post2", ReleaseStatus.TESTED),
        ("0.5.12", ReleaseStatus.TESTED),
        ("0.5.13.post1", ReleaseStatus.TESTED),
        ("0.5.12rc0", ReleaseStatus.OLDER),
        ("0.5.11", ReleaseStatus.OLDER),
        ("0.5.10.post1", ReleaseStatus.OLDER),
        ("junk", ReleaseStatus.UNKNOWN),
        ("", ReleaseStatus.UNKNOWN),
        ("not installed", ReleaseStatus.UNKNOWN),
    ],
)
def test_each_version_string_falls_on_one_side(version: str, status: ReleaseStatus) -> None:
    assert release_status(version) is status
    assert is_tested(version) is (status is ReleaseStatus.TESTED)


def test_the_phrase_names_the_side_and_the_bound() -> None:
    assert untested_phrase("0.5.24.dev0") == (
        "SGLang 0.5.24.dev0 is newer than the newest tested release (0.5.23)"
    )
    assert "older than the oldest supported release (0.5.12)" in untested_phrase("0.5.11")


def test_the_gate_applies_in_the_window_and_outside_only_by_opt_in() -> None:
    opt_in = {"SGLANG_NVFP4_PATCHES_UNTESTED": "apply"}
    assert release_gate("0.5.23", {}).applies and not release_gate("0.5.23", opt_in).opted_in
    closed = release_gate("0.5.24.dev0", {})
    assert not closed.applies
    because = closed.not_patched_because()
    assert "0.5.24.dev0" in because and "sglang-nvfp4-patches verify" in because
    assert "SGLANG_NVFP4_PATCHES_UNTESTED=apply" in because
    opened = release_gate("0.5.24.dev0", opt_in)
    assert opened.applies and opened.opted_in
    assert "0.5.24.dev0" in opened.opt_in_note() and "by opt-in" in opened.opt_in_note()


@pytest.mark.parametrize("value", ["1", "yes", "APPLY ", "true"])
def test_an_unreadable_opt_in_applies_nothing_and_says_why(value: str) -> None:
    gate = release_gate("0.5.24.dev0", {"SGLANG_NVFP4_PATCHES_UNTESTED": value})
    assert not gate.applies
    assert repr(value) in gate.opt_in_error and "'apply'" in gate.opt_in_error
    assert gate.opt_in_error in gate.not_patched_because()


def test_the_reasons_read_in_full() -> None:
    """What doctor and the server log print, word for word (mutation survivors)."""
    assert release_gate("0.5.24.dev0", {}).not_patched_because() == (
        "not patched because SGLang 0.5.24.dev0 is newer than the newest tested release "
        "(0.5.23); run `sglang-nvfp4-patches verify`, then set "
        "SGLANG_NVFP4_PATCHES_UNTESTED=apply to apply it as on a tested release"
    )
    error = (
        "SGLANG_NVFP4_PATCHES_UNTESTED='yes' is not understood; the only value is 'apply' "
        "(unset it to leave an untested SGLang unpatched)"
    )
    gate = release_gate("0.5.24.dev0", {"SGLANG_NVFP4_PATCHES_UNTESTED": "yes"})
    assert gate == ReleaseGate("0.5.24.dev0", False, False, error)
    assert gate.not_patched_because() == (
        "not patched because SGLang 0.5.24.dev0 is newer than the newest tested release "
        f"(0.5.23) and {error}"
    )
    assert (
        untested_phrase("junk") == "SGLang version 'junk' is not a version this plugin can compare"
    )
    assert untested_phrase("0.5.20") == "SGLang 0.5.20 is a tested release"


def test_the_opt_in_is_read_from_the_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SGLANG_NVFP4_PATCHES_UNTESTED", "apply")
    assert release_gate("0.5.24.dev0").opted_in
    monkeypatch.delenv("SGLANG_NVFP4_PATCHES_UNTESTED")
    assert not release_gate("0.5.24.dev0").applies


def test_an_untested_version_with_a_tested_releases_sources_is_that_release() -> None:
    asked: list[str] = []

    def sources_of() -> str | None:
        asked.append("asked")
        return "0.5.23"

    gate = release_gate("0.5.23.post1", {}, sources_of)
    assert gate == ReleaseGate("0.5.23.post1", True, False, "", "0.5.23")
    assert gate.applies and not gate.opted_in  # no opt-in needed, none noted
    assert gate.sources_note() == "its sources equal tested release 0.5.23's"
    opt_in = {"SGLANG_NVFP4_PATCHES_UNTESTED": "apply"}
    assert not release_gate("0.5.23.post1", opt_in, sources_of).opted_in
    unreadable = {"SGLANG_NVFP4_PATCHES_UNTESTED": "yes"}  # an error, and still that release
    assert release_gate("0.5.23.post1", unreadable, sources_of).same_sources_as == "0.5.23"
    assert len(asked) == 3
    # a tested version's sources are never hashed to decide it
    assert release_gate("0.5.23+gabc123", {}, sources_of).same_sources_as == ""
    assert len(asked) == 3


def test_an_untested_version_with_other_sources_stays_untested() -> None:
    gate = release_gate("0.5.23.post1", {}, lambda: None)
    assert gate == ReleaseGate("0.5.23.post1", False, False)
    assert not gate.applies
    assert "0.5.23.post1 is newer than the newest tested release" in gate.not_patched_because()
