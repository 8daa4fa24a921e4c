"""``nvfp4-moe-runner``'s suspension: inside :func:`suspended` the patch declares nothing (a
leaf, so the hooks and the evidence share it without importing each other)."""

from __future__ import annotations

from sglang_nvfp4_patches.suspension import Suspension

_suspension = Suspension("nvfp4_moe_runner_suspended")
suspended = _suspension.suspended
is_suspended = _suspension.active
