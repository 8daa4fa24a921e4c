"""Pure means pure: every module whose docstring says ``(pure`` in its first paragraph imports
neither SGLang nor torch, checked in a fresh interpreter by looking at ``sys.modules`` after
importing it alone. The decision logic must be among them (each patch's rule, its refusal
texts with their exception classes, the root-cause reader), and so must the patch
declarations, so plugin load stays cheap. The tensor transform may import torch, never SGLang.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE_DIR = Path(__file__).resolve().parents[2] / "python" / "sglang_nvfp4_patches"
PURE_TAG = re.compile(r"\(pure\b")
# Named here so that dropping a tag cannot quietly take a module out of the check.
DECISION_LOGIC = (
    "sglang_nvfp4_patches.gemma4_attention.rule",
    "sglang_nvfp4_patches.llama4_router_weight.rule",
    "sglang_nvfp4_patches.llama4_router_weight.refusals",
    "sglang_nvfp4_patches.nvfp4_moe_runner.rule",
    "sglang_nvfp4_patches.release_facts",
    "sglang_nvfp4_patches.patches",
    "sglang_nvfp4_patches.settings",
    "sglang_nvfp4_patches.supported_releases",
)
TENSOR_TRANSFORM = "sglang_nvfp4_patches.llama4_router_weight.prescale"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def documented_pure() -> list[str]:
    """Modules whose docstring's first paragraph carries the ``(pure`` tag (read, not imported)."""
    found = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        if PURE_TAG.search(docstring.split("\n\n")[0]):
            found.append(_module_name(path))
    return found


def heavy_imports(module: str) -> list[str]:
    """SGLang and torch modules in ``sys.modules`` after a fresh interpreter imports ``module``."""
    script = (
        "import importlib, json, sys\n"
        f"importlib.import_module({module!r})\n"
        "print(json.dumps(sorted(name for name in sys.modules if name.split('.')[0] in "
        "('sglang', 'torch'))))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_the_decision_logic_is_documented_pure() -> None:
    assert set(DECISION_LOGIC) <= set(documented_pure())


@pytest.mark.parametrize("module", documented_pure())
def test_a_pure_module_imports_neither_sglang_nor_torch(module: str) -> None:
    assert heavy_imports(module) == []


def test_the_tensor_transform_imports_torch_but_no_sglang() -> None:
    loaded = heavy_imports(TENSOR_TRANSFORM)
    assert "torch" in loaded
    assert [name for name in loaded if name.split(".")[0] == "sglang"] == []
