"""Every declaration names real functions with the signatures ``patch.py`` asks for.

A declaration names its functions as strings (so importing it imports neither SGLang nor
torch); this resolves each one, as the first call would, and checks its parameters against
the protocol of its field: a renamed function, a moved module or a missing parameter (an
``install`` without ``forced``) fails here, not in a server.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
from pathlib import Path

import pytest

from sglang_nvfp4_patches.evidence_records import SHIPPED_NAME
from sglang_nvfp4_patches.patch import PROTOCOLS, RECORD_FUNCTION, CurrentRecord, Lazy, Patch
from sglang_nvfp4_patches.patch_names import EVIDENCE_MODULES
from sglang_nvfp4_patches.patches import PATCHES

NOT_FUNCTIONS = {"name", "architectures", "declares", "not_forceable_because"}


def _parameters(function: object, *, protocol: bool) -> list[tuple[str, object, object]]:
    """Name, kind and annotation of each parameter (a protocol's ``self`` left out)."""
    found = list(inspect.signature(function).parameters.values())  # type: ignore[arg-type]
    return [(p.name, p.kind, p.annotation) for p in (found[1:] if protocol else found)]


def test_every_function_field_has_a_protocol() -> None:
    fields = {field.name for field in dataclasses.fields(Patch)}
    assert set(PROTOCOLS) == fields - NOT_FUNCTIONS


@pytest.mark.parametrize("field", sorted(PROTOCOLS))
@pytest.mark.parametrize("patch", PATCHES, ids=lambda patch: patch.name)
def test_each_named_function_resolves_with_its_protocols_parameters(
    patch: Patch, field: str
) -> None:
    value = getattr(patch, field)
    if not isinstance(value, Lazy):  # an optional field left at its default
        assert field in ("suspended", "runner_may_lift"), f"{patch.name}.{field} is not named"
        return
    assert value.module.startswith(patch_package(patch) + "."), value  # lives in the package
    function = value.resolve()
    expected = _parameters(PROTOCOLS[field].__call__, protocol=True)
    assert _parameters(function, protocol=False) == expected, f"{value.module}.{value.function}"


def patch_package(patch: Patch) -> str:
    """The package that declares ``patch`` (where its ``install`` lives)."""
    install = patch.install
    assert isinstance(install, Lazy)
    return install.module.rsplit(".", 1)[0]


@pytest.mark.parametrize("patch", PATCHES, ids=lambda patch: patch.name)
def test_a_patch_that_ships_records_says_where_it_finds_them(patch: Patch) -> None:
    """The release gate asks ``current_record`` of each module ``EVIDENCE_MODULES`` names,
    whether this SGLang's sources are a tested release's: a patch shipping records and not
    named there would go unasked; one named there finds its record in its own package, with
    the protocol's signature."""
    package = patch_package(patch)
    ships = (Path(importlib.import_module(package).__file__).with_name(SHIPPED_NAME)).is_file()
    assert (patch.name in EVIDENCE_MODULES) is ships, patch.name
    if ships:
        module = EVIDENCE_MODULES[patch.name]
        assert module.startswith(package + "."), module
        read = Lazy(module, RECORD_FUNCTION).resolve()
        assert _parameters(read, protocol=False) == _parameters(
            CurrentRecord.__call__, protocol=True
        )
