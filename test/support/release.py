"""Facts about the releases the suite runs on (the release itself is
``sglang_nvfp4_patches.status.sglang_version()``: an overlay on PYTHONPATH wins)."""

from __future__ import annotations

# The one release whose scheduler module cannot be imported on this CPU machine: its overlay
# runs on the primary environment's sgl_kernel, whose common_ops needs libcuda. Anywhere else
# that import must work.
NO_CPU_SCHEDULER_RELEASE = "0.5.12.post1"
