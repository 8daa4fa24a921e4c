"""Patch ``nvfp4-moe-runner``: a ModelOpt NVFP4 MoE checkpoint of any architecture launched
with no ``--moe-runner-backend`` (with no ``--quantization``, or the model cards'
``--quantization modelopt_fp4``) gets ``flashinfer_cutlass`` published where SGLang's own
layer would fail at its first forward (sglang#39807); a launch line whose layer no runner
serves is refused before the weights load where another line serves it.

* the decision, pure: :func:`.rule.decide`, shown by
  ``test/integration/test_nvfp4_moe_runner.py``;
* the evidence: :mod:`.evidence` runs stand-in checkpoints' first MoE layer on simulated
  Blackwell GPUs, its states ``moe:`` columns of the release facts;
* where it is wired: :func:`.question.answer`, asked through :mod:`..server_args_seam`;
* what the commands call: :mod:`.commands`, :mod:`.checks`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

# ``question`` registers the question where it is defined.
from sglang_nvfp4_patches.nvfp4_moe_runner import commands, question, suspension  # noqa: F401
from sglang_nvfp4_patches.nvfp4_moe_runner.rule import NAME
from sglang_nvfp4_patches.patch import Patch

if TYPE_CHECKING:
    from sglang_nvfp4_patches.check_result import CheckResult


def verify_checks() -> list[CheckResult]:
    from sglang_nvfp4_patches.nvfp4_moe_runner.checks import run_checks  # the simulation

    return run_checks()


def release_facts() -> dict[str, str]:
    from sglang_nvfp4_patches.nvfp4_moe_runner.evidence import facts_cells  # the simulation

    return facts_cells()


PATCH = Patch(
    NAME,
    None,  # every architecture: decided by the checkpoint's MoE layer
    commands.install,
    commands.current_state,
    commands.unpatched_report,
    commands.explain_note,
    verify_checks,
    release_facts,
    suspension.suspended,
    not_forceable_because=(
        "it publishes a runner only where the evidence shows SGLang's own layer failing; pass "
        "--moe-runner-backend flashinfer_cutlass to choose that runner yourself"
    ),
)
