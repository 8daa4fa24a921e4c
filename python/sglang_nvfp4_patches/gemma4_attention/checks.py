"""``gemma4-attention``'s contract: the root-cause verdict and the row it is from, and SGLang's
own resolution of the bundled Gemma 4 NVFP4 MoE config on a simulated SM100: ``triton`` where
the verdict is live, ``trtllm_mha`` where it is fixed; an explicit ``--attention-backend`` is
always the user's.
"""

from __future__ import annotations

from sglang_nvfp4_patches.check_result import CheckFailed, CheckResult, NotApplicable, run_check
from sglang_nvfp4_patches.gemma4_attention.read_back import bundled_on_sm100
from sglang_nvfp4_patches.gemma4_attention.rule import AFFECTED_BACKEND, NAME, SAFE_BACKEND
from sglang_nvfp4_patches.gemma4_attention.rule_state import (
    NO_FACTS,
    kv_scale_verdict,
    verdict_phrase,
)


def _verdict() -> str:
    """The release facts' verdict, never derived here (reading code cannot prove the fix)."""
    verdict = kv_scale_verdict()
    if verdict.evidence == NO_FACTS:
        raise NotApplicable(verdict_phrase(verdict))
    return verdict.evidence


def _default() -> str:
    verdict = kv_scale_verdict()
    expected = SAFE_BACKEND if verdict.bug_live else AFFECTED_BACKEND
    got = bundled_on_sm100()
    if got != expected:
        raise CheckFailed(
            f"SGLang resolves the bundled Gemma 4 NVFP4 MoE config (FP8 KV cache) on SM100 to "
            f"{got}, but the verdict is {verdict.handoff.value}, which calls for {expected}"
        )
    return f"SGLang resolves it on SM100 to {got}, as the verdict ({verdict.handoff.value}) asks"


def _explicit() -> str:
    got = bundled_on_sm100(AFFECTED_BACKEND)
    if got != AFFECTED_BACKEND:
        raise CheckFailed(
            f"--attention-backend {AFFECTED_BACKEND} resolves to {got}: the user's choice is "
            "overridden"
        )
    return f"--attention-backend {AFFECTED_BACKEND} stays {AFFECTED_BACKEND}"


def run_checks() -> list[CheckResult]:
    """Every check (call in a process where SGLang loaded the plugin)."""
    return [
        run_check(NAME, "root-cause verdict", _verdict),
        run_check(NAME, "Gemma 4 NVFP4 MoE, FP8 KV cache, SM100 default", _default),
        run_check(NAME, "explicit --attention-backend honoured", _explicit),
    ]
