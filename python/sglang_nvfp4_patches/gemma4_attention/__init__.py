"""Patch ``gemma4-attention``: Gemma 4 NVFP4 MoE on SM10X gets ``triton`` attention where this
SGLang's ``trtllm_mha`` drops the FP8 KV-cache scales (sglang#26518; fixed by sglang#28144).

* the rule, pure: :func:`.rule.decide_gemma4_attention`, shown by
  ``test/integration/test_gemma4_resolution.py``;
* the root cause: the release facts' ``gemma4:v-scale``, :func:`.rule_state.kv_scale_verdict`
  (none: unknown, counted as live);
* where it is wired: :func:`.rule_state.answer`, asked through :mod:`..server_args_seam`;
* what the commands call: :mod:`.commands`.
"""

from __future__ import annotations

# ``rule_state`` registers the question where it is defined.
from sglang_nvfp4_patches.gemma4_attention import commands, rule_state
from sglang_nvfp4_patches.gemma4_attention.rule import NAME
from sglang_nvfp4_patches.models import GEMMA4_ARCHITECTURES
from sglang_nvfp4_patches.patch import Patch

PATCH = Patch(
    NAME,
    GEMMA4_ARCHITECTURES,
    commands.install,
    commands.verified_state,  # doctor also asks SGLang to resolve the bundled config
    commands.unpatched_report,
    commands.explain_note,
    commands.run_checks,
    suspended=rule_state.suspended,  # explain's unpatched column
)
