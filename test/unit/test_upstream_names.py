"""Every private name of someone else's code this package relies on (SGLang's above all, but
also argparse's and the like) has its item in docs/upstream.md, with the probe or test that
notices when it changes; an item for a name the code no longer uses fails too (pure: the source
is parsed, never imported)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE_DIR = REPO / "python" / "sglang_nvfp4_patches"
UPSTREAM = REPO / "docs" / "upstream.md"
SECTION = "## Private names we rely on"
OURS_PREFIX = "_sglang_nvfp4_patches"  # attributes we set on SGLang's objects ourselves
_PRIVATE = re.compile(r"_[A-Za-z][A-Za-z0-9_]*")
_ITEM = re.compile(r"^- `(_\w+)`: (.*)$")  # an item; its lines that follow are indented
_TEST = re.compile(r"`(test/[\w/]+\.py)::(\w+)`")


def _private(name: str) -> bool:
    return bool(_PRIVATE.fullmatch(name)) and not name.startswith(("__", OURS_PREFIX))


def _defined(tree: ast.AST) -> set[str]:
    """Every name the code itself binds: functions, classes, parameters, variables,
    attributes it assigns, import aliases."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.alias) and node.asname:
            names.add(node.asname)
    return names


def _mentioned(tree: ast.AST) -> set[str]:
    """Private names the code reaches: attributes, whole string constants (``getattr``, hook
    targets), names imported; the literal pieces of an f-string are no names."""
    pieces = {
        id(value)
        for node in ast.walk(tree)
        if isinstance(node, ast.JoinedStr)
        for value in node.values
    }
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in pieces
        ):
            names.add(node.value)
        elif isinstance(node, ast.ImportFrom):
            names.update(alias.name for alias in node.names)
    return {name for name in names if _private(name)}


def foreign_private_names(package: Path) -> dict[str, set[str]]:
    """Private names used in ``package`` that none of its modules binds, each with the files
    that use it (relative to ``package``)."""
    trees = {path: ast.parse(path.read_text(encoding="utf-8")) for path in package.rglob("*.py")}
    ours = set().union(*(_defined(tree) for tree in trees.values()))
    used: dict[str, set[str]] = {}
    for path, tree in trees.items():
        for name in _mentioned(tree) - ours:
            used.setdefault(name, set()).add(str(path.relative_to(package)))
    return used


def listed_rows(text: str) -> dict[str, str]:
    """The items of the section's list: name -> the rest of its item (its lines joined)."""
    _, found, section = text.partition(SECTION)
    if not found:
        raise LookupError(f"docs/upstream.md has no {SECTION!r} section")
    rows: dict[str, str] = {}
    name = ""
    for line in section.split("\n## ", 1)[0].splitlines():
        if match := _ITEM.match(line):
            name = match[1]
            rows[name] = match[2]
        elif name and line.startswith("  "):
            rows[name] += " " + line.strip()
        else:
            name = ""
    return rows


def _test_functions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test")
    }


USED = foreign_private_names(PACKAGE_DIR)
ROWS = listed_rows(UPSTREAM.read_text(encoding="utf-8"))


def test_every_private_name_the_code_uses_is_listed_and_every_listed_one_is_used() -> None:
    assert {name: sorted(files) for name, files in USED.items() if name not in ROWS} == {}
    assert sorted(set(ROWS) - set(USED)) == []


def test_each_row_names_a_test_that_exists() -> None:
    missing = []
    for name, row in ROWS.items():
        tests = _TEST.findall(row)
        if not tests:
            missing.append(f"{name}: no test named")
        for file, function in tests:
            path = REPO / file
            if not path.is_file() or function not in _test_functions(path):
                missing.append(f"{name}: {file}::{function}")
    assert missing == []


def test_the_scanner_finds_a_new_private_name_and_ignores_our_own(tmp_path: Path) -> None:
    """The plant: a module that reaches a new private name of SGLang's is found; a private
    helper of ours, a ``getattr`` of our own attribute and an f-string's piece are not."""
    (tmp_path / "hook.py").write_text(
        "import sglang.srt.server_args as server_args\n"
        "def _ours(x):\n"
        "    return getattr(x, '_ours')\n"
        "TABLE = server_args._NEW_TABLE\n"
        "NAME = f'enable_{TABLE}_moe'\n"
        "setattr(TABLE, '_sglang_nvfp4_patches_seen', True)\n",
        encoding="utf-8",
    )
    assert foreign_private_names(tmp_path) == {"_NEW_TABLE": {"hook.py"}}
