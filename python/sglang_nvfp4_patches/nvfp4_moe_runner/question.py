"""``nvfp4-moe-runner``'s question to the server-args seam: for every architecture, the MoE
runner to declare, decided per launch from its facts (MoE layer settings, quantization and
runner so far, GPU, checkpoint quantization), with the decision's log lines, once per model,
and the refusal of a launch no runner serves where another launch line does."""

from __future__ import annotations

import functools
import logging
import threading

from sglang_nvfp4_patches import fused_functions
from sglang_nvfp4_patches.errors import LaunchRefused
from sglang_nvfp4_patches.models import moe_settings
from sglang_nvfp4_patches.moe_layout import Layout
from sglang_nvfp4_patches.nvfp4_moe_runner import suspension
from sglang_nvfp4_patches.nvfp4_moe_runner.rule import (
    AUTO,
    CUTLASS,
    NAME,
    Decision,
    EvidenceState,
    LaunchFacts,
    decide,
    refusal,
)
from sglang_nvfp4_patches.release_gate import VERIFY_COMMAND
from sglang_nvfp4_patches.server_args_seam.launch import Launch
from sglang_nvfp4_patches.server_args_seam.question import question
from sglang_nvfp4_patches.server_args_seam.seam import SeamKind
from sglang_nvfp4_patches.supported_releases import sglang_version

FIELD = "moe_runner_backend"
logger = logging.getLogger("sglang_nvfp4_patches.nvfp4_moe_runner")
_logged: set[tuple[str, ...]] = set()  # the decisions logged, per model
_lock = threading.Lock()


@question(NAME, FIELD, is_suspended=suspension.is_suspended, before_adjustments=False)
def answer(launch: Launch) -> str | None:
    """The runner to declare where the decision publishes one (``None``: SGLang's stands)."""
    from sglang_nvfp4_patches.moe_layout import shown_layouts

    settings = moe_settings(launch.hf_config)
    declared = launch.declared
    facts = LaunchFacts(
        settings=None if settings is None else settings.key,
        quantization=declared.get("quantization", launch.view.quantization),
        runner=declared.get(FIELD, launch.view.moe_runner_backend),
        capability=launch.capability,
        checkpoint_quantization=lambda: launch.model_config.quantization,
        layout=Layout.of(launch.view),
        own_runner=functools.cache(lambda: _own_runner(launch)),  # a whole resolution
        registered=fused_functions.registered,
        runners_for=fused_functions.runners_for,
        shown=shown_layouts,
    )
    return decide_and_log(facts, launch).runner


def _own_runner(launch: Launch) -> str | None:
    """The runner SGLang publishes itself for this launch (``None``: auto)."""
    if launch.seam.kind is SeamKind.ADJUSTMENTS_METHOD:
        own = launch.view.moe_runner_backend
    else:
        own = launch.sglang_alone(FIELD)
    own = getattr(own, "value", own)
    return None if own in (None, AUTO) else str(own)


def _once(model_path: str, decision: Decision) -> bool:
    key = (model_path, decision.key, decision.reason, str(decision.runner), str(decision.not_shown))
    with _lock:
        first = key not in _logged
        _logged.add(key)
    return first


def decide_and_log(facts: LaunchFacts, launch: Launch) -> Decision:
    """The decision for one launch, carried out: its INFO, WARNING or ERROR line, or
    :class:`LaunchRefused` where it refuses the launch."""
    from sglang_nvfp4_patches.nvfp4_moe_runner.evidence import current_facts

    decision = decide(facts, current_facts)
    model_path = launch.model_path
    if decision.instead is not None or decision.layout_refusal is not None:
        message = refusal(decision, model_path, sglang_version(), facts.layout)
        raise LaunchRefused(f"[{NAME}] {message}")
    if decision.state is None or not _once(model_path, decision):
        return decision
    if decision.not_shown is not None:
        logger.warning(
            "[%s] %s: the MoE runner decision (%s) was shown on CPU for one GPU, not for this "
            "layout (%s); it is kept, as its runner has a fused function for the all-to-all "
            "backend. Run `%s` to check this layout's facts.",
            NAME,
            model_path,
            decision.runner or "SGLang's own runner",
            decision.not_shown,
            VERIFY_COMMAND,
        )
    if decision.runner is not None:
        logger.info(
            "[%s] %s: with the MoE runner left at auto (%s), %s; publishing %s, SGLang's own "
            "runner for modelopt_fp4 on SM110/SM120 (pass --moe-runner-backend to choose "
            "another).",
            NAME,
            model_path,
            decision.key,
            decision.reason,
            decision.runner,
        )
    elif decision.state is EvidenceState.NO_REMEDY:
        logger.error(
            "[%s] %s: SGLang %s's ModelOpt NVFP4 MoE layer fails here (%s) on every runner this "
            "plugin can publish, and no other launch line is shown to serve it: %s. It is left "
            "as SGLang ships it.",
            NAME,
            model_path,
            sglang_version(),
            decision.key,
            decision.reason,
        )
    elif decision.state in (EvidenceState.UNKNOWN, EvidenceState.NOT_COVERED):
        logger.error(
            "[%s] %s: cannot tell whether SGLang %s's ModelOpt NVFP4 MoE layer serves with the "
            "MoE runner left at auto (%s%s), so it is left as SGLang ships it; where that layer "
            "builds the flashinfer_trtllm runner on weights prepared for another, it fails at "
            "the first forward. Run `%s`, or pass --moe-runner-backend %s.",
            NAME,
            model_path,
            sglang_version(),
            f"{decision.key}: " if decision.key else "",
            decision.reason,
            VERIFY_COMMAND,
            CUTLASS,
        )
    return decision
