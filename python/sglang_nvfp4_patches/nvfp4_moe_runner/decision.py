"""The rule as this process runs it, for every seam's hook: the evidence record read when a
launch needs it, and the decision's log lines (one per model and
GPU per process)."""

from __future__ import annotations

import logging
import threading

from sglang_nvfp4_patches.nvfp4_moe_runner import NAME
from sglang_nvfp4_patches.nvfp4_moe_runner.rule import (
    CUTLASS,
    Decision,
    EvidenceState,
    LaunchFacts,
    decide,
)
from sglang_nvfp4_patches.release_gate import VERIFY_COMMAND
from sglang_nvfp4_patches.status import sglang_version

logger = logging.getLogger("sglang_nvfp4_patches.nvfp4_moe_runner")

_logged: set[tuple[str, str, str]] = set()
_lock = threading.Lock()


def _once(model_path: str, decision: Decision) -> bool:
    key = (model_path, decision.reason, str(decision.runner))
    with _lock:
        if key in _logged:
            return False
        _logged.add(key)
        return True


def decide_and_log(facts: LaunchFacts, model_path: str) -> Decision:
    """The decision for one launch, with its INFO line where it publishes and one ERROR where
    the evidence cannot tell (the way out named)."""
    from sglang_nvfp4_patches.nvfp4_moe_runner.evidence import current_facts

    decision = decide(facts, current_facts)
    if decision.state is None or not _once(model_path, decision):
        return decision
    if decision.runner is not None:
        logger.info(
            "[%s] %s: with the MoE runner left at auto, %s; publishing %s, SGLang's own runner "
            "for modelopt_fp4 on SM110/SM120 (pass --moe-runner-backend to choose another).",
            NAME,
            model_path,
            decision.reason,
            decision.runner,
        )
    elif decision.state is EvidenceState.UNKNOWN:
        logger.error(
            "[%s] %s: cannot tell whether SGLang %s's ModelOpt NVFP4 MoE layer serves with the "
            "MoE runner left at auto (%s), so it is left as SGLang ships it. Run `%s`, or pass "
            "--moe-runner-backend %s.",
            NAME,
            model_path,
            sglang_version(),
            decision.reason,
            VERIFY_COMMAND,
            CUTLASS,
        )
    return decision
