"""Every declaration hands :class:`~sglang_nvfp4_patches.patch.Patch` functions that take what
the commands pass: one missing a parameter (an ``install`` without ``observe``) fails here, not
in a server."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from sglang_nvfp4_patches.patch import Patch
from sglang_nvfp4_patches.patches import PATCHES

# How many arguments each command passes to a declared function.
ARGUMENTS = {
    "install": 2,
    "state": 0,
    "unpatched": 0,
    "explain_note": 2,
    "verify_checks": 0,
    "release_facts": 0,
    "suspended": 0,
    "runner_may_lift": 1,
}


def test_every_function_field_is_counted() -> None:
    fields = {field.name for field in dataclasses.fields(Patch)}
    assert set(ARGUMENTS) == fields - {"name", "architectures", "not_forceable_because"}


@pytest.mark.parametrize("field", sorted(ARGUMENTS))
@pytest.mark.parametrize("patch", PATCHES, ids=lambda patch: patch.name)
def test_each_function_takes_what_is_passed(patch: Patch, field: str) -> None:
    function = getattr(patch, field)
    default = next(f.default for f in dataclasses.fields(Patch) if f.name == field)
    if function is None or function is default:  # an optional field left at its default
        return
    inspect.signature(function).bind(*[None] * ARGUMENTS[field])  # TypeError: it cannot
