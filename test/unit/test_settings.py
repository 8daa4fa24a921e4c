"""SGLANG_NVFP4_PATCHES_DISABLE parsing (no SGLang import)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from sglang_nvfp4_patches.cli import main
from sglang_nvfp4_patches.errors import UsageError
from sglang_nvfp4_patches.patches import PATCHES
from sglang_nvfp4_patches.settings import (
    DISABLE_ENV,
    FORCE_ENV,
    UNTESTED_ENV,
    InvalidForceError,
    UnknownPatchNameError,
    check_environment,
    disabled_patches,
    forced_patches,
)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("", set()),
        ("gemma4-attention", {"gemma4-attention"}),
        (
            " gemma4-attention , llama4-router-weight ,",
            {"gemma4-attention", "llama4-router-weight"},
        ),
        (",,", set()),
    ],
)
def test_known_names(raw: str, expected: set[str]) -> None:
    assert disabled_patches(PATCHES, {DISABLE_ENV: raw}) == expected


def test_unset_means_nothing_disabled() -> None:
    assert disabled_patches(PATCHES, {}) == frozenset()


def test_unknown_name_is_an_error_naming_it_and_the_known_ones() -> None:
    with pytest.raises(UnknownPatchNameError) as caught:
        disabled_patches(PATCHES, {DISABLE_ENV: "gemma4-attention,gemma4-atention"})
    message = str(caught.value)
    assert "gemma4-atention" in message
    assert "llama4-router-weight" in message and DISABLE_ENV in message


# ------------------------------------------------------------------ SGLANG_NVFP4_PATCHES_FORCE


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("", set()),
        ("gemma4-attention", {"gemma4-attention"}),
        (" gemma4-attention ,", {"gemma4-attention"}),
    ],
)
def test_force_accepts_the_forceable_patch(raw: str, expected: set[str]) -> None:
    assert forced_patches(PATCHES, {FORCE_ENV: raw}) == expected


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        ("gemma4-atention", "gemma4-atention"),
        ("llama4-router-weight", "apply it twice"),
        ("gemma4-attention,llama4-router-weight", "llama4-router-weight"),
        ("gemma4-attention;llama4-router-weight", "gemma4-attention;llama4-router-weight"),
    ],
)
def test_invalid_force_is_an_error_that_forces_nothing(raw: str, named: str) -> None:
    with pytest.raises(InvalidForceError) as caught:
        forced_patches(PATCHES, {FORCE_ENV: raw})
    message = str(caught.value)
    assert named in message and FORCE_ENV in message
    assert "Nothing is forced" in message


# ------------------------------------------------------------------ what the operator reads


def test_the_process_environment_is_read_when_no_mapping_is_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(DISABLE_ENV, "llama4-router-weight")
    monkeypatch.setenv(FORCE_ENV, "gemma4-attention")
    assert disabled_patches(PATCHES) == {"llama4-router-weight"}
    assert forced_patches(PATCHES) == {"gemma4-attention"}


def test_unknown_names_read_in_full() -> None:
    raw = "gemma4-atention,llama-router"
    with pytest.raises(UnknownPatchNameError) as disabled:
        disabled_patches(PATCHES, {DISABLE_ENV: raw})
    assert str(disabled.value) == (
        f"{DISABLE_ENV}='{raw}' names unknown patch(es) gemma4-atention, llama-router; known "
        f"patches are {', '.join(patch.name for patch in PATCHES)} (comma-separated)."
    )
    with pytest.raises(InvalidForceError) as forced:
        forced_patches(PATCHES, {FORCE_ENV: raw})
    assert str(forced.value) == (
        f"{FORCE_ENV}='{raw}' names unknown patch(es) gemma4-atention, llama-router; only "
        "gemma4-attention can be forced. Nothing is forced."
    )


def test_a_patch_that_cannot_be_forced_says_why_in_full() -> None:
    (llama4,) = [patch for patch in PATCHES if patch.name == "llama4-router-weight"]
    with pytest.raises(InvalidForceError) as forced:
        forced_patches(PATCHES, {FORCE_ENV: "llama4-router-weight"})
    assert str(forced.value) == (
        f"{FORCE_ENV}='llama4-router-weight': llama4-router-weight cannot be forced "
        f"({llama4.not_forceable_because}); only gemma4-attention can be forced. "
        "Nothing is forced."
    )
    assert "apply it twice" in llama4.not_forceable_because


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("SGLANG_NVFP4_PATCHES_DISABLE", "gemma-attention"),
        ("SGLANG_NVFP4_PATCHES_FORCE", "nvfp4-moe-runner"),
        ("SGLANG_NVFP4_PATCHES_UNTESTED", "yes"),
        ("SGLANG_NVFP4_PATCHES_RECORDS", "FILE"),
        ("SGLANG_NVFP4_PATCHES_RECORDS", "FILE/records"),
        ("SGLANG_NVFP4_PATCHES_RECORDS", "/tmp/" + "r" * 300),
        ("SGLANG_NVFP4_PATCHES_RECORDS", "/dev/null"),
        ("SGLANG_NVFP4_PATCHES_RECORDS", "/proc/records"),  # root's access() says writable
    ],
)
@pytest.mark.parametrize("command", ["explain", "doctor", "verify"])
def test_a_wrong_variable_is_bad_input_naming_it_before_sglang(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: str,
    variable: str,
    value: str,
) -> None:
    """Once ``verify`` said "8 failed" for a records location that was a regular file: a
    wrong value read as SGLang failing its checks. Now it is one line naming the variable,
    exit 2, before SGLang is imported (this lane has no SGLang: an import would fail)."""
    (tmp_path / "FILE").write_text("not a directory")
    monkeypatch.setenv(variable, value.replace("FILE", str(tmp_path / "FILE")))
    code = main([command])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith(f"error: {variable}=") and len(err.splitlines()) == 1, err
    assert (tmp_path / "FILE").read_text() == "not a directory"


def test_a_records_location_that_does_not_exist_yet_is_fine(tmp_path: Path) -> None:
    check_environment(PATCHES, {"SGLANG_NVFP4_PATCHES_RECORDS": str(tmp_path / "a" / "b")})
    check_environment(PATCHES, {"SGLANG_NVFP4_PATCHES_RECORDS": str(tmp_path)})
    check_environment(PATCHES, {})
    assert list(tmp_path.iterdir()) == []  # neither the missing directories nor a probe file


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        (DISABLE_ENV, "gemma-attention", "names unknown patch(es) gemma-attention"),
        (FORCE_ENV, "nvfp4-moe-runner", "cannot be forced"),
        (UNTESTED_ENV, "yes", "is not understood"),
    ],
)
def test_the_mapping_given_is_the_one_checked(variable: str, value: str, says: str) -> None:
    """What a caller hands in is checked, whatever this process's own environment holds."""
    with pytest.raises(UsageError) as refused:
        check_environment(PATCHES, {variable: value})
    assert str(refused.value).startswith(f"{variable}={value!r}") and says in str(refused.value)


@pytest.mark.parametrize("where", ["FILE", "FILE/records"])
def test_a_records_location_that_is_no_directory_names_itself(tmp_path: Path, where: str) -> None:
    """Once the message named the write probe's random file inside a regular file."""
    (tmp_path / "FILE").write_text("not a directory")
    given = str(tmp_path / where)
    with pytest.raises(UsageError) as refused:
        check_environment(PATCHES, {"SGLANG_NVFP4_PATCHES_RECORDS": given})
    assert str(refused.value) == (
        f"SGLANG_NVFP4_PATCHES_RECORDS={given!r}: Not a directory ({given}); point it at a "
        "directory this user can write (a missing one is made), or unset it"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["FILE"]


def test_a_records_location_that_cannot_be_written_names_the_directory_tried() -> None:
    """Procfs refuses a new file even to root, whose permission checks pass."""
    with pytest.raises(UsageError) as refused:
        check_environment(PATCHES, {"SGLANG_NVFP4_PATCHES_RECORDS": "/proc/records"})
    said = {
        str(refused.value).replace(os.strerror(code), "<why>")
        for code in (errno.ENOENT, errno.EACCES, errno.EROFS)
    }
    assert (
        "SGLANG_NVFP4_PATCHES_RECORDS='/proc/records': <why> (/proc); point it at a directory "
        "this user can write (a missing one is made), or unset it"
    ) in said
