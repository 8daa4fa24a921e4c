"""The SGLang release the interpreter imports (an overlay on PYTHONPATH wins)."""

from __future__ import annotations

import importlib.metadata


def installed_sglang() -> str:
    try:
        return importlib.metadata.version("sglang")
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


# The one release whose scheduler module cannot be imported on this CPU machine: its overlay
# runs on the primary environment's sgl_kernel, whose common_ops needs libcuda. Anywhere else
# that import must work.
NO_CPU_SCHEDULER_RELEASE = "0.5.12.post1"
