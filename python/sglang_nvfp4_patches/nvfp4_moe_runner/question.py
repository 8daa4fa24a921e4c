"""``nvfp4-moe-runner``'s question to the server-args seam (:mod:`..server_args_seam`): for
every architecture, the MoE runner to declare, decided per launch (:mod:`.decision`) from its
facts: the MoE layer settings its config gives, the quantization and MoE runner resolution has
so far (the operator's flags, then SGLang's own model defaults), the GPU, and the checkpoint's
quantization as SGLang detects it. Where SGLang adjusts the record in place it is asked after
those adjustments, where they left the runner at ``auto``."""

from __future__ import annotations

from sglang_nvfp4_patches.models import moe_settings
from sglang_nvfp4_patches.nvfp4_moe_runner import NAME, decision, suspension
from sglang_nvfp4_patches.nvfp4_moe_runner.rule import LaunchFacts
from sglang_nvfp4_patches.server_args_seam.launch import Launch
from sglang_nvfp4_patches.server_args_seam.question import Question
from sglang_nvfp4_patches.server_args_seam.seam import SeamKind

FIELD = "moe_runner_backend"


def answer(launch: Launch) -> str | None:
    """The runner to declare where the decision publishes one and SGLang's whole resolution,
    left alone, would publish none (a model's later pass may: that one stands)."""
    settings = moe_settings(launch.hf_config)
    declared = launch.declared
    facts = LaunchFacts(
        settings=None if settings is None else settings.key,
        quantization=declared.get("quantization", launch.view.quantization),
        runner=declared.get(FIELD, launch.view.moe_runner_backend),
        capability=launch.capability,
        checkpoint_quantization=lambda: launch.model_config.quantization,
    )
    in_place = launch.seam.kind is SeamKind.ADJUSTMENTS_METHOD  # resolved: nothing follows
    alone = None if in_place else (lambda: launch.sglang_alone(FIELD))
    return decision.decide_and_log(facts, launch.model_path, alone).runner


QUESTION = Question(NAME, FIELD, answer, None, suspension.is_suspended, before_adjustments=False)
