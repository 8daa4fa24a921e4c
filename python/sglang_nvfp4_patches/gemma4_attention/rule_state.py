"""The rule as this process runs it: its mode (set once by ``install``), ``explain``'s
suspension of it, the mark left on records it saw, and the rule run in that mode with its log
lines. Every layout's hook reads it."""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from sglang_nvfp4_patches.gemma4_attention import NAME
from sglang_nvfp4_patches.gemma4_attention.rule import (
    Gemma4Action,
    Gemma4Decision,
    Gemma4Facts,
    Gemma4Mode,
    decide_gemma4_attention,
    override_hint,
)
from sglang_nvfp4_patches.suspension import Suspension

logger = logging.getLogger("sglang_nvfp4_patches.gemma4_attention")

# Set by ``install`` once per process; the hooks read it.
_mode: Gemma4Mode | None = None
# Lets ``explain`` compute SGLang's unpatched answer in a process where the patch is live.
_suspension = Suspension("gemma4_attention_suspended")
suspended = _suspension.suspended  # inside this block the installed patch declares nothing
is_suspended = _suspension.active
# Left on every ServerArgs record the rule evaluated. Bookkeeping attributes travel with the
# record when SGLang pickles it to the scheduler, which therefore knows whether the rule saw
# it (``launch_paths``); no module-level reference keeps a record alive.
SEEN_MARK = "_sglang_nvfp4_patches_gemma4_seen"


def set_mode(mode: Gemma4Mode) -> None:
    global _mode
    _mode = mode


def current_mode() -> Gemma4Mode | None:
    return _mode


def mark_seen(record: Any) -> None:
    with contextlib.suppress(AttributeError, TypeError):
        setattr(record, SEEN_MARK, True)


def was_seen(record: Any) -> bool:
    return bool(getattr(record, SEEN_MARK, False))


def decide_and_log(facts: Gemma4Facts, model_path: str) -> Gemma4Decision:
    """The rule in this process's mode, with its INFO line and at most one WARNING."""
    mode = _mode or Gemma4Mode.FIXED
    decision = decide_gemma4_attention(facts, mode)
    if decision.action is Gemma4Action.USE_TRITON:
        logger.info("[%s] %s: %s; %s.", NAME, model_path, decision.reason, override_hint(mode))
    if decision.warning is not None:
        logger.warning("[%s] %s: %s.", NAME, model_path, decision.warning)
    return decision
