"""Patch ``gemma4-attention``: Gemma 4 NVFP4 MoE on SM10X gets ``triton`` attention where this
SGLang's ``trtllm_mha`` drops the FP8 KV-cache scales (sglang#26518; fixed by sglang#28144).

* the rule, pure: :func:`.rule.decide_gemma4_attention`, shown by
  ``test/integration/test_gemma4_resolution.py``;
* the root cause: the release facts' ``gemma4:v-scale``, :func:`.rule_state.kv_scale_verdict`
  (none: unknown, counted as live);
* where it is wired: :data:`.rule_state.QUESTION`, asked through :mod:`..server_args_seam`;
* what the commands call: :mod:`.install`, :mod:`.read_back`, :mod:`.explain_facts`,
  :mod:`.checks`.
"""

from __future__ import annotations

from sglang_nvfp4_patches.models import GEMMA4_ARCHITECTURES
from sglang_nvfp4_patches.patch import declare
from sglang_nvfp4_patches.patch_names import GEMMA4_ATTENTION

NAME = GEMMA4_ATTENTION
PATCH = declare(
    __name__,
    name=NAME,
    architectures=GEMMA4_ARCHITECTURES,
    install="install.install",
    state="read_back.verified_state",  # doctor also asks SGLang to resolve the bundled config
    unpatched="read_back.unpatched_report",
    explain_note="explain_facts.explain_note",
    verify_checks="checks.run_checks",
    suspended="rule_state.suspended",  # explain's unpatched column
    declares=frozenset({"attention_backend"}),
)
