"""The SGLang release the interpreter imports (an overlay on PYTHONPATH wins)."""

from __future__ import annotations

import importlib.metadata


def installed_sglang() -> str:
    try:
        return importlib.metadata.version("sglang")
    except importlib.metadata.PackageNotFoundError:
        return "not installed"
