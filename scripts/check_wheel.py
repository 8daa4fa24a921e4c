#!/usr/bin/env python3
"""Build the wheel from a clean copy of the tree and check what installing it would do.

* ``Requires-Dist: sglang`` has a lower bound and no upper bound: ``pip install`` next to a
  newer SGLang must never downgrade the user's server (the runtime guard refuses releases it
  does not support, with one WARNING).
* Every file of the package source is in the wheel, the bundled ``example_configs`` included.
* SGLang's plugin entry point is declared.

Usage: ``.venv/bin/python scripts/check_wheel.py`` (exit 0 when all holds, else 1). Offline:
when the environment already has the build backend pyproject asks for, pip builds without
build isolation.
"""

from __future__ import annotations

import email.parser
import importlib.metadata
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import tomllib
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

REPO = Path(__file__).resolve().parents[1]
PACKAGE = "sglang_nvfp4_patches"
ENTRY_POINT = ("sglang.srt.plugins", "nvfp4_patches = sglang_nvfp4_patches.plugin:register")
UPPER_BOUND_OPERATORS = frozenset({"<", "<=", "==", "===", "~="})
LOWER_BOUND_OPERATORS = frozenset({">", ">=", "==", "===", "~="})


def upper_bounds(specifier: SpecifierSet) -> list[str]:
    """The clauses of ``specifier`` that cap the version (``==`` and ``~=`` cap too)."""
    return sorted(str(spec) for spec in specifier if spec.operator in UPPER_BOUND_OPERATORS)


def sglang_requirement_problems(requires_dist: list[str]) -> list[str]:
    sglang = [r for r in map(Requirement, requires_dist) if r.name.lower() == "sglang"]
    if len(sglang) != 1:
        return [f"expected one Requires-Dist for sglang, found {len(sglang)}"]
    (requirement,) = sglang
    problems = []
    caps = upper_bounds(requirement.specifier)
    if caps:
        problems.append(
            f"Requires-Dist {requirement} caps sglang ({', '.join(caps)}); installing would "
            "downgrade a newer SGLang: declare the lower bound only"
        )
    if not any(spec.operator in LOWER_BOUND_OPERATORS for spec in requirement.specifier):
        problems.append(f"Requires-Dist {requirement} has no lower bound (>=)")
    return problems


def wheel_problems(wheel: Path, source_files: list[str]) -> list[str]:
    """What is wrong with ``wheel``; ``source_files`` are package paths that must be in it."""
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        dist_info = {
            name.split("/")[0] for name in names if name.split("/")[0].endswith(".dist-info")
        }
        if len(dist_info) != 1:
            return [f"{wheel.name}: expected one .dist-info folder, found {sorted(dist_info)}"]
        (info,) = dist_info
        metadata = email.parser.Parser().parsestr(archive.read(f"{info}/METADATA").decode())
        entry_points = (
            archive.read(f"{info}/entry_points.txt").decode()
            if f"{info}/entry_points.txt" in names
            else ""
        )
    problems = sglang_requirement_problems(metadata.get_all("Requires-Dist") or [])
    problems += [f"{wheel.name} lacks {path}" for path in source_files if path not in names]
    group, line = ENTRY_POINT
    if f"[{group}]" not in entry_points or line not in entry_points.replace("  ", " "):
        problems.append(f"{wheel.name} does not declare the entry point [{group}] {line}")
    return problems


def package_files(root: Path) -> list[str]:
    """Every file of the package as the wheel names it (``sglang_nvfp4_patches/...``)."""
    base = root / "python"
    return sorted(
        path.relative_to(base).as_posix()
        for path in (base / PACKAGE).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    )


def _clean_copy(target: Path) -> None:
    """The files git would check out (tracked and untracked, not ignored): no stale build/."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)


def _backend_installed(root: Path) -> bool:
    requires = tomllib.loads((root / "pyproject.toml").read_text())["build-system"]["requires"]
    for requirement in map(Requirement, requires):
        try:
            version = importlib.metadata.version(requirement.name)
        except importlib.metadata.PackageNotFoundError:
            return False
        if not requirement.specifier.contains(version, prereleases=True):
            return False
    return True


def build_wheel(source: Path, out: Path) -> Path:
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out)]
    if _backend_installed(source):
        command.append("--no-build-isolation")
    subprocess.run([*command, str(source)], check=True)
    (wheel,) = out.glob("*.whl")
    return wheel


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="check-wheel-") as tmp:
        source, out = Path(tmp) / "src", Path(tmp) / "dist"
        _clean_copy(source)
        wheel = build_wheel(source, out)
        files = package_files(source)
        problems = wheel_problems(wheel, files)
    for problem in problems:
        print(f"check_wheel: {problem}", file=sys.stderr)
    if not problems:
        print(f"check_wheel: {wheel.name} ok ({len(files)} package files, sglang lower bound only)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
