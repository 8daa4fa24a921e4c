"""Patch ``llama4-router-weight``: Llama 4's router weight on the FlashInfer CUTLASS MoE runner.

Llama 4 builds its MoE with ``apply_router_weight_on_input=True``; the CUTLASS kernel only
scales expert outputs. For top-1 routing, pre-scaling each token's activations by its router
weight and handing the kernel unit float32 scales is exact; the rest is refused when the MoE
layer is built.

* decision, pure: :func:`.rule.refusal_for` (texts: :mod:`.refusals`); transform: :mod:`.prescale`;
* seams: :mod:`.runner_registry` (fused functions), :mod:`.method_lift` (the methods of
  :mod:`.rejecting_methods`), :mod:`.layer_facts`, :mod:`.flag_free_view`,
  :mod:`.ray_job_check` (``--use-ray``), :mod:`.suspension` (``explain``'s unpatched column);
* commands: :mod:`.install` (outcomes in :mod:`.outcomes`), :mod:`.read_back` (``doctor``),
  :mod:`.explain_facts`, :mod:`.checks` (``verify``);
* tests: ``test/unit/test_llama4_*.py``, ``test/integration/test_llama4_*.py``.
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
