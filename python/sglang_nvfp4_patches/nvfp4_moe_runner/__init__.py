"""Patch ``nvfp4-moe-runner``: a ModelOpt NVFP4 MoE checkpoint of any architecture launched
with no ``--moe-runner-backend`` (with no ``--quantization``, or the model cards'
``--quantization modelopt_fp4``) gets ``flashinfer_cutlass`` published where SGLang's own
layer would fail at its first forward (sglang#39807); a launch line whose layer no runner
serves is refused before the weights load where another line serves it.

* the decision, pure: :func:`.rule.decide`, shown by
  ``test/integration/test_nvfp4_moe_runner.py``;
* the evidence: :mod:`.evidence` runs stand-in checkpoints' first MoE layer on simulated
  Blackwell GPUs, its states ``moe:`` columns of the release facts;
* where it is wired: :data:`.question.QUESTION`, asked through :mod:`..server_args_seam`;
* what the commands call: :mod:`.install`, :mod:`.read_back`, :mod:`.explain_facts`,
  :mod:`.checks`.
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
