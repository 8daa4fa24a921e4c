"""Patch ``llama4-router-weight``: Llama 4's router weight on the FlashInfer CUTLASS MoE runner.

Llama 4 builds its MoE with ``apply_router_weight_on_input=True``; the CUTLASS kernel only
scales expert outputs. For top-1 routing, pre-scaling the activations by the router weight
(:mod:`.prescale`) is exact. One pure function decides everything, from the release facts and
the layer being built: :func:`.rule.decide` (the runner gets our pre-scale or not, each method's
check lifted or not, the layer refused or not). Seams carrying it out: :mod:`.runner_registry`,
:mod:`.method_lift`; commands: :mod:`.install`, :mod:`.read_back` (``doctor``), :mod:`.checks`
(``verify``); the rest: docs/code-map.md.
"""

from __future__ import annotations

from sglang_nvfp4_patches.models import LLAMA4_ARCHITECTURES
from sglang_nvfp4_patches.patch import declare
from sglang_nvfp4_patches.patch_names import LLAMA4_ROUTER_WEIGHT

NAME = LLAMA4_ROUTER_WEIGHT
PATCH = declare(
    __name__,
    name=NAME,
    architectures=LLAMA4_ARCHITECTURES,
    install="install.install",
    state="read_back.current_state",
    unpatched="read_back.unpatched_report",
    explain_note="explain_facts.explain_note",
    verify_checks="checks.run_checks",
    suspended="suspension.suspended",  # explain's unpatched column
    runner_may_lift="refusals.another_runner_may_serve",
)
