"""Patch ``nvfp4-moe-runner``: a ModelOpt NVFP4 MoE checkpoint of any architecture launched
with no ``--moe-runner-backend`` (with no ``--quantization``, or the model cards'
``--quantization modelopt_fp4``) gets ``flashinfer_cutlass`` published where SGLang's own
layer would fail at its first forward (sglang#39807); a launch line whose layer no runner
serves is refused before the weights load where another line serves it.

What it does, where it is wired, how it is tested:

* the decision, pure: :func:`.rule.decide` (per launch, from the evidence), shown by
  ``test/integration/test_nvfp4_moe_runner.py``;
* the evidence: :mod:`.evidence` runs SGLang's first MoE layer of stand-in checkpoints on
  simulated Blackwell GPUs (:mod:`..simulation.moe_forward`), kept per MoE layer settings,
  GPU and launch line as a record (:mod:`..evidence_records`);
* where it is wired: :data:`.question.QUESTION`, asked through the server-args seam
  (:mod:`..server_args_seam`), which also runs the rule in this process (record, log lines);
  :mod:`.suspension` passes every call through (``explain``'s unpatched column);
* what the commands call (the declaration below): :mod:`.install`, :mod:`.read_back`
  (``doctor``), :mod:`.explain_facts`, :mod:`.checks` (``verify``);
* tests: ``test/unit/test_nvfp4_moe_runner_*.py``, ``test/integration/test_nvfp4_moe_runner*.py``.
"""

from __future__ import annotations

from sglang_nvfp4_patches.patch import declare
from sglang_nvfp4_patches.patch_names import NVFP4_MOE_RUNNER

NAME = NVFP4_MOE_RUNNER
PATCH = declare(
    __name__,
    name=NAME,
    architectures=None,  # every architecture: decided by the checkpoint's MoE layer
    install="install.install",
    state="read_back.current_state",
    unpatched="read_back.unpatched_report",
    explain_note="explain_facts.explain_note",
    verify_checks="checks.run_checks",
    suspended="suspension.suspended",
    declares=frozenset({"moe_runner_backend"}),
)
