"""``llama4-router-weight``'s suspension (:mod:`sglang_nvfp4_patches.suspension`): inside
:func:`suspended` every hook passes calls through; the evidence suspends one half at a time
(:func:`method_lift_suspended`, :func:`runner_prescale_suspended`).
"""

from __future__ import annotations

from sglang_nvfp4_patches.suspension import Suspension

_suspension = Suspension("llama4_router_weight_suspended")
suspended = _suspension.suspended
is_suspended = _suspension.active

_method_lift = Suspension("llama4_router_weight_method_lift_suspended")
method_lift_suspended = _method_lift.suspended
_runner_prescale = Suspension("llama4_router_weight_runner_prescale_suspended")
runner_prescale_suspended = _runner_prescale.suspended


def is_method_lift_suspended() -> bool:
    return _suspension.active() or _method_lift.active()


def is_runner_prescale_suspended() -> bool:
    return _suspension.active() or _runner_prescale.active()
