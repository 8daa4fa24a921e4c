"""Patch ``llama4-router-weight``: Llama 4's router weight on the FlashInfer CUTLASS MoE runner.

Llama 4 builds its MoE with ``apply_router_weight_on_input=True``; the CUTLASS kernel only
scales expert outputs. For top-1 routing, multiplying each token's activations by its router
weight before quantization and handing the kernel unit float32 scales is exact; what cannot
be made exact is refused when the MoE layer is built.

What it does, where it is wired, how it is tested:

* the decision, pure: :func:`.rule.refusal_for` (per layer: lift or refuse), shown by
  ``test/integration/test_llama4_modelopt_method.py``; :mod:`.refusals` (the texts, their
  exception classes and switches); the tensor transform: :mod:`.prescale` (torch);
* the seams, one module each: :mod:`.runner_registry` (the runner's fused functions),
  :mod:`.method_lift` (the NVFP4 MoE methods' ``create_moe_runner``; which methods:
  :mod:`.rejecting_methods`), :mod:`.layer_facts`
  (what SGLang fixed about a layer when it builds it), :mod:`.flag_free_view` (the config
  the methods check), :mod:`.ray_job_check` (``--use-ray``: the Ray job's runtime env),
  :mod:`.suspension` (``explain``'s unpatched column: every hook passes the call through);
* what the commands call (the declaration below): :mod:`.install` (each part's outcome in
  :mod:`.outcomes`), :mod:`.read_back` (``doctor``), :mod:`.explain_facts` (the note and the
  first MoE layer), :mod:`.checks` (``verify``);
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
