"""``scripts/check_wheel.py``'s checks on hand-made wheels, and pyproject's sglang requirement.

CI runs the script on the real wheel; these show that each check can fail.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.version import Version

from sglang_nvfp4_patches.supported_releases import OLDEST_SUPPORTED, TESTED_RELEASES
from support.repo_scripts import REPO, load_script

check_wheel = load_script("check_wheel")
INFO = "sglang_nvfp4_patches-0.1.0.dist-info"
FILES = [
    "sglang_nvfp4_patches/__init__.py",
    "sglang_nvfp4_patches/example_configs/gemma-4-26b-a4b-nvfp4/config.json",
]
ENTRY_POINTS = "[sglang.srt.plugins]\nnvfp4_patches = sglang_nvfp4_patches.plugin:register\n"


def _wheel(
    tmp_path: Path,
    requires: tuple[str, ...] = ("sglang>=0.5.12", "torch"),
    files: list[str] = FILES,
    entry_points: str = ENTRY_POINTS,
) -> Path:
    path = tmp_path / "sglang_nvfp4_patches-0.1.0-py3-none-any.whl"
    metadata = "Metadata-Version: 2.4\nName: sglang-nvfp4-patches\nVersion: 0.1.0\n"
    metadata += "".join(f"Requires-Dist: {r}\n" for r in requires)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{INFO}/METADATA", metadata)
        archive.writestr(f"{INFO}/entry_points.txt", entry_points)
        for name in files:
            archive.writestr(name, "")
    return path


def test_a_good_wheel_passes(tmp_path: Path) -> None:
    assert check_wheel.wheel_problems(_wheel(tmp_path), FILES) == []


@pytest.mark.parametrize(
    ("requirement", "says"),
    [
        ("sglang>=0.5.14,<0.5.24", "caps sglang (<0.5.24)"),
        ("sglang==0.5.23", "caps sglang (==0.5.23)"),
        ("sglang~=0.5.14", "caps sglang (~=0.5.14)"),
        ("sglang<=0.5.23,>=0.5.12", "caps sglang (<=0.5.23)"),
        ("sglang", "has no lower bound"),
    ],
)
def test_a_capped_or_unbounded_sglang_requirement_fails(
    tmp_path: Path, requirement: str, says: str
) -> None:
    problems = check_wheel.wheel_problems(_wheel(tmp_path, requires=(requirement,)), FILES)
    assert len(problems) == 1 and says in problems[0]


def test_a_missing_bundled_config_fails(tmp_path: Path) -> None:
    problems = check_wheel.wheel_problems(_wheel(tmp_path, files=FILES[:1]), FILES)
    assert problems == [f"sglang_nvfp4_patches-0.1.0-py3-none-any.whl lacks {FILES[1]}"]


def test_a_missing_entry_point_fails(tmp_path: Path) -> None:
    problems = check_wheel.wheel_problems(_wheel(tmp_path, entry_points=""), FILES)
    assert len(problems) == 1 and "entry point [sglang.srt.plugins]" in problems[0]


def test_the_package_files_include_the_bundled_configs() -> None:
    files = check_wheel.package_files(REPO)
    examples = REPO / "python/sglang_nvfp4_patches/example_configs"
    configs = sorted(examples.glob("*/config.json"))
    folders = [path for path in examples.iterdir() if path.is_dir() and path.name != "__pycache__"]
    assert configs and len(configs) == len(folders)  # every bundled stand-in has its config
    for config in configs:
        assert f"sglang_nvfp4_patches/example_configs/{config.parent.name}/config.json" in files
    assert "sglang_nvfp4_patches/cli.py" in files


def _declared_sglang() -> Requirement:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    (sglang,) = [
        r for r in map(Requirement, pyproject["project"]["dependencies"]) if r.name == "sglang"
    ]
    return sglang


def test_pyproject_declares_a_lower_bound_only() -> None:
    assert check_wheel.sglang_requirement_problems([str(_declared_sglang())]) == []


@pytest.mark.parametrize("release", [*TESTED_RELEASES, "0.5.24", "0.6.0", "1.0.0"])
def test_installing_accepts_every_supported_and_every_newer_release(release: str) -> None:
    assert _declared_sglang().specifier.contains(release)


def test_the_declared_lower_bound_excludes_no_supported_release() -> None:
    (declared,) = [spec for spec in _declared_sglang().specifier if spec.operator == ">="]
    assert Version(declared.version) <= Version(OLDEST_SUPPORTED)
