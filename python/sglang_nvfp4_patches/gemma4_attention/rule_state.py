"""The rule as this process runs it: the root-cause verdict and the mode it gives (set once by
``install``), its suspension, the mark left on records it saw, and its question to the
server-args seam (:func:`answer`: the facts read off the launch, the rule with its log lines,
the check of records resolved early)."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
from typing import TYPE_CHECKING, Any

from sglang_nvfp4_patches.gemma4_attention import rule
from sglang_nvfp4_patches.gemma4_attention.rule import NAME, Gemma4Facts, Gemma4Mode
from sglang_nvfp4_patches.models import GEMMA4_ARCHITECTURES
from sglang_nvfp4_patches.server_args_seam.question import question
from sglang_nvfp4_patches.suspension import Suspension

if TYPE_CHECKING:
    from sglang_nvfp4_patches.server_args_seam.launch import Launch

logger = logging.getLogger("sglang_nvfp4_patches.gemma4_attention")

NO_FACTS = "no release facts for these SGLang sources, an untested release or edited ones"
HOW_TO_CHECK = (
    "to check, compare triton and trtllm_mha with `sglang-nvfp4-patches accuracy ab` on an SM10X "
    "GPU, and where they agree pass --attention-backend trtllm_mha"
)

_mode: Gemma4Mode | None = None  # set by ``install`` once per process; the hooks read it
# Lets ``explain`` compute SGLang's unpatched answer in a process where the patch is live.
_suspension = Suspension("gemma4_attention_suspended")
suspended = _suspension.suspended  # inside this block the installed patch declares nothing
is_suspended = _suspension.active
# Left on every record the rule evaluated: it travels with the record pickled to the scheduler
# (:func:`warn_if_bypassed`), and no module-level reference keeps a record alive.
SEEN_MARK = "_sglang_nvfp4_patches_gemma4_seen"


@functools.cache
def kv_scale_verdict() -> rule.KvScaleVerdict:
    """The release facts' ``gemma4:v-scale`` for these SGLang sources (once). Reading the code
    could prove the bug present, never absent: with no row that says, it is unknown."""
    from sglang_nvfp4_patches.release_facts import current_row
    from sglang_nvfp4_patches.supported_releases import sglang_version

    row = current_row()
    cell = None if row is None else row.cell(rule.V_SCALE_COLUMN)
    if row is None or cell is None:
        return rule.KvScaleVerdict(rule.KvScaleHandoff.UNKNOWN, NO_FACTS)
    path = f"trtllm_mha_backend.py, FP8 KV-cache path: {cell}"
    return rule.KvScaleVerdict(rule.KvScaleHandoff(cell), f"{path}, {row.origin(sglang_version())}")


def verdict_phrase(verdict: rule.KvScaleVerdict) -> str:
    """How ``doctor`` and ``explain`` name a live verdict (unknown: how to check)."""
    said = f"{verdict.evidence} ({rule.ROOT_CAUSE_ISSUE})"
    if verdict.handoff is rule.KvScaleHandoff.UNKNOWN:
        return f"root cause unknown, counted as live: {said}; {HOW_TO_CHECK}"
    return f"root cause live, trtllm_mha drops the FP8 KV-cache V scale: {said}"


def mode_for(forced: bool) -> Gemma4Mode:
    if forced:
        return Gemma4Mode.FORCED
    return Gemma4Mode.LIVE if kv_scale_verdict().bug_live else Gemma4Mode.FIXED


def set_mode(mode: Gemma4Mode) -> None:
    global _mode
    _mode = mode


def current_mode() -> Gemma4Mode | None:
    return _mode


def decide_and_log(facts: Gemma4Facts, model_path: str) -> rule.Gemma4Decision:
    """The rule in this process's mode, with its INFO line and at most one WARNING."""
    mode = _mode or Gemma4Mode.FIXED
    decision = rule.decide_gemma4_attention(facts, mode)
    if decision.attention_backend is not None:
        logger.info("[%s] %s: %s; %s.", NAME, model_path, decision.reason, rule.override_hint(mode))
    if decision.warning is not None:
        logger.warning("[%s] %s: %s.", NAME, model_path, decision.warning)
    return decision


def facts_of(launch: Launch, backends: tuple[str | None, ...]) -> Gemma4Facts:
    """The rule's facts of ``launch`` with these attention ``backends`` (the KV-cache dtype read
    only where it matters)."""
    hf_config = launch.hf_config
    text_config = getattr(hf_config, "text_config", None)
    facts = Gemma4Facts(
        launch.architecture,
        launch.model_config.quantization,
        getattr(hf_config if text_config is None else text_config, "enable_moe_block", None),
        rule.SM10X_MAJOR if launch.is_sm100 else None,  # SM10X exactly as SGLang's default sees it
        *backends,
    )
    if not rule.is_nvfp4_moe_on_sm10x(facts):
        return facts
    try:
        fp8 = rule.kv_cache_is_fp8(launch.view.kv_cache_dtype, launch.kv_cache_quant_algo)
    except Exception as error:  # unreadable: counted as FP8, the checkpoint's default
        logger.debug("[%s] KV-cache dtype unknown (%s); assuming FP8", NAME, error)
        return dataclasses.replace(facts, kv_cache_fp8=None)
    return dataclasses.replace(facts, kv_cache_fp8=fp8)


def backends_of(source: Any) -> tuple[str | None, ...]:
    return (
        source.attention_backend,
        source.prefill_attention_backend,
        source.decode_attention_backend,
    )


def warn_if_bypassed(launch: Launch) -> bool:
    """One WARNING where a record resolved before SGLang loaded plugins (which launch paths:
    docs/releases.md) never met the rule and runs where it would not (checked by the
    scheduler)."""
    if _mode in (None, Gemma4Mode.FIXED) or getattr(launch.record, SEEN_MARK, False):
        return False
    # Where resolution wrote the record in place, what the operator typed is gone.
    given = backends_of(launch.record) if launch.pristine else (None, None, None)
    decision = rule.decide_gemma4_attention(facts_of(launch, given), _mode)
    if decision.attention_backend is None or (
        rule.AFFECTED_BACKEND not in backends_of(launch.view)
    ):
        return False
    logger.warning(
        "[%s] %s: this ServerArgs was resolved before SGLang loaded plugins (for example "
        "http_server.launch_server(ServerArgs(...)), sglang.Runtime, HttpServerEngineAdapter "
        "or bench_one_batch_server), so the rule did not run and the server uses %s, %s. "
        "Start it with `sglang serve` or sglang.Engine(**kwargs), call "
        "sglang.srt.plugins.load_plugins() before building ServerArgs, or pass %s.",
        NAME,
        launch.record.model_path,
        rule.AFFECTED_BACKEND,
        rule.why_triton(_mode),
        rule.WAYS_OUT,
    )
    return True


@question(
    NAME,
    "attention_backend",
    GEMMA4_ARCHITECTURES,
    is_suspended,
    before_adjustments=True,  # exactly as if the operator had typed --attention-backend triton
    check_record=warn_if_bypassed,
)
def answer(launch: Launch) -> str | None:
    """The ``attention_backend`` to declare for ``launch`` (``None``: SGLang's stands)."""
    with contextlib.suppress(AttributeError, TypeError):
        setattr(launch.record, SEEN_MARK, True)
    facts = facts_of(launch, backends_of(launch.view))
    return decide_and_log(facts, launch.model_path).attention_backend
