"""Arrows with the grain: the import graph of ``python/sglang_nvfp4_patches`` has no cycle.

Read with ``ast`` only (nothing is imported, so no SGLang): every ``import`` and ``from ...
import`` anywhere in a module (module level, in functions, under ``TYPE_CHECKING``), relative
ones resolved against the module's package. ``from pkg import name`` is an arrow to
``pkg.name`` where that is a module of ours, else to ``pkg``. Importing ``a.b.c`` also runs
``a/__init__`` and ``a/b/__init__``; those implicit arrows are left out, since a package's
``__init__`` is run by every import of anything in it and is not a dependency its modules chose.

The same graph is then read one level up, each top-level module and subpackage of the package
one node (``settings``, ``patches``, ``llama4_router_weight``, ``verify``, ...): a loop such as
settings -> patches -> a patch package -> process_record -> settings has no cycle among modules
(patches imports only the package's declaration), yet ties the settings to every patch.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

from sglang_nvfp4_patches.patches import PATCHES

PACKAGE_DIR = Path(__file__).resolve().parents[2] / "python" / "sglang_nvfp4_patches"
ROOT = PACKAGE_DIR.name


def module_files(package_dir: Path) -> dict[str, Path]:
    """``{dotted module name: file}`` for every ``.py`` under ``package_dir``."""
    found = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = path.relative_to(package_dir.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _imported(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    """The dotted names one import statement in ``module`` reaches (``pkg.name`` candidates
    first for ``from pkg import name``)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        package = module.split(".") if is_package else module.split(".")[:-1]
        base = ".".join(package[: len(package) - node.level + 1])
        source = f"{base}.{node.module}" if node.module else base
    else:
        source = node.module or ""
    return [source] + [f"{source}.{alias.name}" for alias in node.names]


def import_graph(files: Mapping[str, Path]) -> dict[str, set[str]]:
    """``{module: modules of ours it imports}``."""
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        targets: set[str] = set()
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            names = _imported(node, module, is_package)
            if isinstance(node, ast.ImportFrom):
                source, members = names[0], names[1:]
                submodules = [name for name in members if name in files]
                if len(submodules) < len(members) and source in files:
                    submodules.append(source)  # a name defined in the package or module
                targets.update(submodules)
            else:
                targets.update(name for name in names if name in files)
        targets.discard(module)
        graph[module] = targets
    return graph


def cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(start: str) -> None:  # iterative: no recursion limit on a deep graph
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for target in edges:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph.get(target, ())))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(found)


def test_the_package_imports_in_no_cycle() -> None:
    graph = import_graph(module_files(PACKAGE_DIR))
    assert len(graph) > 50, "the package's modules were not found"
    found = cycles(graph)
    assert found == [], "import cycles (each a strongly connected component):\n" + "\n".join(
        " <-> ".join(component) for component in found
    )


def top_level(graph: Mapping[str, Iterable[str]]) -> dict[str, set[str]]:
    """The graph with each module folded into its top-level module or subpackage of ``ROOT``."""

    def unit(module: str) -> str:
        return ".".join(module.split(".")[:2])

    folded: dict[str, set[str]] = {}
    for module, targets in graph.items():
        folded.setdefault(unit(module), set()).update(
            unit(target) for target in targets if unit(target) != unit(module)
        )
    return folded


def test_the_top_level_modules_and_subpackages_import_in_no_cycle() -> None:
    found = cycles(top_level(import_graph(module_files(PACKAGE_DIR))))
    assert found == [], "import cycles among top-level modules and subpackages:\n" + "\n".join(
        " <-> ".join(component) for component in found
    )


def test_only_the_list_of_patches_imports_a_patch() -> None:
    """The commands name no patch: what they need of one comes through its declaration, so
    no module outside a patch package imports it but ``patches.py``, the list of them (nor
    does one patch import another)."""
    graph = top_level(import_graph(module_files(PACKAGE_DIR)))
    for patch in PATCHES:
        package = f"{ROOT}.{patch.name.replace('-', '_')}"
        assert package in graph, package
        importers = {unit for unit, targets in graph.items() if package in targets}
        assert importers == {f"{ROOT}.patches"}, (package, importers)


def test_the_graph_sees_every_kind_of_import(tmp_path: Path) -> None:
    """A cycle closed by each kind of import the package uses is found, and a chain is not."""
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    sources = {
        "__init__.py": "",
        "a.py": "import pkg.b\n",
        "b.py": "def f():\n    from .sub import c\n",  # function-level, relative, submodule
        "sub/__init__.py": "",
        "sub/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..a import x\n",
        "d.py": "from pkg import a\n",  # imports into the cycle, is not part of it
        "sub/e.py": "from . import f\n",
        "sub/f.py": "from pkg.sub.e import g\n",
    }
    for name, text in sources.items():
        (package / name).write_text(text, encoding="utf-8")
    graph = import_graph(module_files(package))
    assert cycles(graph) == [["pkg.a", "pkg.b", "pkg.sub.c"], ["pkg.sub.e", "pkg.sub.f"]]
    assert cycles(top_level(graph)) == [["pkg.a", "pkg.b", "pkg.sub"]]
