"""``llama4-router-weight``'s suspension (:mod:`sglang_nvfp4_patches.suspension`): inside
:func:`suspended` the methods' hook and the runner's pre-scale pass every call through."""

from __future__ import annotations

from sglang_nvfp4_patches.suspension import Suspension

_suspension = Suspension("llama4_router_weight_suspended")
suspended = _suspension.suspended
is_suspended = _suspension.active
