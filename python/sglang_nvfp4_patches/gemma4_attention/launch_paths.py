"""Launch paths that resolve ServerArgs before SGLang loads plugins bypass the rule.

``http_server.launch_server(ServerArgs(...))``, ``HttpServerEngineAdapter``,
``sglang.Runtime``, ``bench_one_batch_server`` and, where the engine resolves the record
itself (``resolve_once``), ``Engine._launch_subprocesses`` called directly resolve the record
first; releases without ``resolve_once`` even resolve on construction (which releases:
docs/releases.md). The scheduler process always loads plugins before it builds its
``Scheduler``, so that is where a record the rule never saw (no ``SEEN_MARK``) is caught:
one WARNING per scheduler process when the rule would have changed its attention backend.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from sglang_nvfp4_patches.gemma4_attention import NAME, rule_state
from sglang_nvfp4_patches.gemma4_attention.rule import (
    AFFECTED_BACKEND,
    Gemma4Action,
    Gemma4Facts,
    Gemma4Mode,
    decide_gemma4_attention,
    ways_out,
    why_triton,
)
from sglang_nvfp4_patches.gemma4_attention.server_args_facts import (
    pristine_record_facts,
    record_facts,
)
from sglang_nvfp4_patches.sglang_hooks import install_hook

SCHEDULER_MODULE = "sglang.srt.managers.scheduler"
SCHEDULER_INIT = f"{SCHEDULER_MODULE}.Scheduler.__init__"


def _pristine_facts(record: Any) -> tuple[Gemma4Facts, tuple[Any, ...]]:
    """With ``resolve_once``: the record keeps the user's input; resolution lives in
    declarations."""
    from sglang.srt.arg_groups.model_override_base import resolved_view

    view = resolved_view(record)
    used = (view.attention_backend, view.prefill_attention_backend, view.decode_attention_backend)
    return pristine_record_facts(record, record), used


def _resolved_in_place_facts(record: Any) -> tuple[Gemma4Facts, tuple[Any, ...]]:
    """Without ``resolve_once`` resolution wrote the record: what the user typed is gone."""
    facts = record_facts(record, "sglang.srt.server_args")
    used = (
        facts.attention_backend,
        facts.prefill_attention_backend,
        facts.decode_attention_backend,
    )
    unset = dataclasses.replace(
        facts, attention_backend=None, prefill_attention_backend=None, decode_attention_backend=None
    )
    return unset, used


def warn_if_rule_bypassed(record: Any) -> bool:
    """One WARNING when ``record`` never met the rule and runs where the rule would not."""
    mode = rule_state.current_mode()
    if mode in (None, Gemma4Mode.FIXED) or rule_state.was_seen(record):
        return False
    pristine = hasattr(record, "resolve_once")
    facts, used = _pristine_facts(record) if pristine else _resolved_in_place_facts(record)
    decision = decide_gemma4_attention(facts, mode)
    if decision.action is not Gemma4Action.USE_TRITON or AFFECTED_BACKEND not in used:
        return False
    rule_state.logger.warning(
        "[%s] %s: this ServerArgs was resolved before SGLang loaded plugins (for example "
        "http_server.launch_server(ServerArgs(...)), sglang.Runtime, HttpServerEngineAdapter "
        "or bench_one_batch_server), so the rule did not run and the server uses %s, %s. "
        "Start it with `sglang serve` or sglang.Engine(**kwargs), call "
        "sglang.srt.plugins.load_plugins() before building ServerArgs, or pass %s.",
        NAME,
        record.model_path,
        AFFECTED_BACKEND,
        why_triton(mode),
        ways_out(),
    )
    return True


def scheduler_init_hook(original: Callable[..., Any], scheduler: Any, *args: Any, **kw: Any) -> Any:
    server_args = kw.get("server_args", args[0] if args else None)
    if server_args is not None:
        try:
            warn_if_rule_bypassed(server_args)
        except Exception as error:  # a diagnostic must never stop the scheduler
            rule_state.logger.debug("[%s] bypass check skipped: %s", NAME, error)
    return original(scheduler, *args, **kw)


def hook_scheduler(module: Any) -> None:
    if hasattr(getattr(module, "Scheduler", None), "__init__"):
        install_hook(SCHEDULER_INIT, scheduler_init_hook)
