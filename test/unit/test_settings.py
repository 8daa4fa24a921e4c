"""SGLANG_NVFP4_PATCHES_DISABLE parsing (no SGLang import)."""

from __future__ import annotations

import pytest

from sglang_nvfp4_patches.settings import DISABLE_ENV, UnknownPatchNameError, disabled_patches


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
    assert disabled_patches({DISABLE_ENV: raw}) == expected


def test_unset_means_nothing_disabled() -> None:
    assert disabled_patches({}) == frozenset()


def test_unknown_name_is_an_error_naming_it_and_the_known_ones() -> None:
    with pytest.raises(UnknownPatchNameError) as caught:
        disabled_patches({DISABLE_ENV: "gemma4-attention,gemma4-atention"})
    message = str(caught.value)
    assert "gemma4-atention" in message
    assert "llama4-router-weight" in message and DISABLE_ENV in message
