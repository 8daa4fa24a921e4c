"""docs/code-map.md cannot lie: every name of this package it gives resolves (imported, then
each attribute looked up), every file it names exists, every test it names is a test function
of that file, and every patch has its section (no SGLang import: the modules the map names
import none at module level, and the last test checks that)."""

from __future__ import annotations

import ast
import importlib
import re
import sys
from pathlib import Path

import pytest

from sglang_nvfp4_patches.patches import PATCHES

REPO = Path(__file__).resolve().parents[2]
PACKAGE = "sglang_nvfp4_patches"
PACKAGE_DIR = REPO / "python" / PACKAGE
CODE_MAP = REPO / "docs" / "code-map.md"
# `module.attr...` in backticks; `file.py` and `test/...::test_...` are read apart
DOTTED = re.compile(r"`([A-Za-z_]\w*(?:\.\w+)+)`")
TEST = re.compile(r"`(test/[\w/]+\.py)::(\w+)`")
PATH = re.compile(r"`(\w+/[\w/]*\w+\.(?:py|md|json))`")  # a file of ours, by its path
FILE_SUFFIXES = ("py", "md", "json")


def our_top_level() -> set[str]:
    """The modules and subpackages directly under the package."""
    return {path.stem for path in PACKAGE_DIR.glob("*.py")} | {
        path.parent.name for path in PACKAGE_DIR.glob("*/__init__.py")
    }


def named(text: str) -> tuple[list[str], list[str], list[tuple[str, str]]]:
    """(our dotted names, the files of ours, the tests) the map names. SGLang's names start
    with ``sglang.`` or with a class (``ServerArgs.…``); ours always start with our module, and
    any other dotted name is kept among ours, so that it fails to resolve."""
    dotted, files = [], []
    for name in dict.fromkeys(DOTTED.findall(text)):
        if name.rsplit(".", 1)[1] in FILE_SUFFIXES:
            files.append(name)
        elif name.split(".")[0] != "sglang" and not name[0].isupper():
            dotted.append(name)
    files += [path for path in dict.fromkeys(PATH.findall(text)) if not path.startswith("test/")]
    return dotted, files, list(dict.fromkeys(TEST.findall(text)))


def resolve(dotted: str) -> object:
    """``sglang_nvfp4_patches.<dotted>``: the longest importable module, then attributes."""
    parts = dotted.split(".")
    if parts[0] not in our_top_level():
        raise LookupError(f"{parts[0]!r} is no module of {PACKAGE} (nor sglang.)")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join([PACKAGE, *parts[:cut]]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[cut:]:
            found = getattr(found, attribute)
        return found
    raise LookupError(dotted)


def _test_functions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test")
    }


MAP_TEXT = CODE_MAP.read_text(encoding="utf-8")
DOTTED_NAMES, FILES, TESTS = named(MAP_TEXT)


def test_the_map_names_enough_to_check() -> None:
    assert len(DOTTED_NAMES) > 40 and len(TESTS) > 15, (len(DOTTED_NAMES), len(TESTS))


@pytest.mark.parametrize("dotted", DOTTED_NAMES)
def test_every_name_of_ours_resolves(dotted: str) -> None:
    try:
        resolve(dotted)
    except (LookupError, AttributeError, ImportError) as error:
        pytest.fail(f"docs/code-map.md names `{dotted}`, which does not resolve: {error}")


@pytest.mark.parametrize("name", FILES)
def test_every_file_it_names_exists(name: str) -> None:
    assert (PACKAGE_DIR / name).is_file() or (REPO / name).is_file(), name


@pytest.mark.parametrize(("file", "function"), TESTS, ids=[f"{f}::{t}" for f, t in TESTS])
def test_every_test_it_names_exists(file: str, function: str) -> None:
    path = REPO / file
    assert path.is_file(), f"docs/code-map.md names {file}, which does not exist"
    assert function in _test_functions(path), f"{file} has no test function {function}"


def test_every_patch_has_its_section() -> None:
    for name in [patch.name for patch in PATCHES]:
        assert f"\n## `{name}`\n" in MAP_TEXT, f"docs/code-map.md has no section for {name}"


def test_the_names_resolve_without_sglang() -> None:
    """Resolving imports no SGLang module (none that an earlier test had not imported)."""
    before = set(sys.modules)
    for dotted in DOTTED_NAMES:
        resolve(dotted)
    assert [name for name in set(sys.modules) - before if name.split(".")[0] == "sglang"] == []
