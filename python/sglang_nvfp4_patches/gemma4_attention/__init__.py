"""Patch ``gemma4-attention``: Gemma 4 NVFP4 MoE on SM10X gets ``triton`` attention where this
SGLang's ``trtllm_mha`` drops the FP8 KV-cache scales (sglang#26518; fixed by sglang#28144).

What it does, where it is wired, how it is tested:

* the rule, pure: :func:`.rule.decide_gemma4_attention` (sglang#26791's rule and when it
  applies), shown by ``test/integration/test_gemma4_resolution.py``;
* the root cause, pure: :mod:`.v_scale_question` reads a ``trtllm_mha_backend.py`` source;
  :mod:`.backend_source` finds this SGLang's copy and says live, fixed or unknown;
* where it is wired: :data:`.rule_state.QUESTION`, asked through the server-args seam
  (:mod:`..server_args_seam`), which every patch setting a server-args default shares;
  :mod:`.rule_state` also runs the rule in this process's mode;
* what the commands call (the declaration below): :mod:`.install`, :mod:`.read_back`
  (``doctor``), :mod:`.explain_facts`, :mod:`.checks` (``verify``);
* tests: ``test/unit/test_gemma4_*.py``, ``test/integration/test_gemma4_*.py``.
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
