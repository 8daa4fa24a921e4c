"""``nvfp4-moe-runner``'s contract, on CPU, through SGLang's own resolution, ``FusedMoE``,
weight loader and ModelOpt NVFP4 method on simulated Blackwell GPUs; only kernels are stood in
for (:mod:`..simulation.moe_forward`).

* the evidence: SGLang's first MoE layer, launched with no flags as SGLang ships it, and with
  ``--moe-runner-backend flashinfer_cutlass``, per family and GPU; it must agree with the
  record CI shipped for this SGLang, or becomes this machine's record;
* a server launched with no flags (bundled Llama 4 and Gemma 4 ModelOpt configs): the runner
  published is ``flashinfer_cutlass`` where the evidence shows SGLang's own layer failing,
  SGLang's own elsewhere, and the layer built on it serves (Llama 4: ``expert(x * w)``);
* ``--moe-runner-backend`` or ``--quantization`` given: resolution is SGLang's own, field for
  field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sglang_nvfp4_patches.check_result import CheckFailed, CheckResult, NotApplicable, run_check
from sglang_nvfp4_patches.evidence_check import agrees_or_kept
from sglang_nvfp4_patches.models import GEMMA4, LLAMA4
from sglang_nvfp4_patches.nvfp4_moe_runner import NAME
from sglang_nvfp4_patches.nvfp4_moe_runner.evidence import (
    SOURCES,
    bundled_models,
    current_record,
    gather,
)
from sglang_nvfp4_patches.nvfp4_moe_runner.rule import CUTLASS, EvidenceState, evidence_key

# Where a plain launch is checked: every GPU SGLang's own rule names flashinfer_cutlass for,
# and SM10X for Llama 4 (its TRT-LLM FP4 path weights expert outputs, never inputs).
SERVER_LAUNCHES: tuple[tuple[str, str], ...] = (
    (LLAMA4, "sm120"),
    (LLAMA4, "sm121"),
    (GEMMA4, "sm120"),
    (GEMMA4, "sm121"),
    (LLAMA4, "sm100"),
    (LLAMA4, "sm103"),
)
# Flags that make the launch the user's: resolution must be SGLang's own.
GIVEN_FLAGS: tuple[dict[str, str], ...] = (
    {"moe_runner_backend": "flashinfer_trtllm"},
    {"moe_runner_backend": CUTLASS},
    {"quantization": "modelopt_fp4"},
)


def outline(facts: Mapping[str, Any]) -> dict[str, tuple[Any, ...]]:
    """What two evidence gatherings must agree on (states, runners, verdicts: not the free
    text, whose numbers may differ in the last digit from one CPU to another)."""

    def run(item: Any) -> tuple[Any, ...]:
        return (None,) if item is None else (item["runner"], item["verdict"])

    return {
        key: (fact["state"], fact["published"], *run(fact["unpatched"]), *run(fact[CUTLASS]))
        for key, fact in facts.items()
    }


def _evidence(found: dict[str, Any]) -> str:
    summary = "; ".join(f"{key}: {fact['state']}" for key, fact in found.items())
    return agrees_or_kept(NAME, SOURCES, current_record(), found, outline, summary)


def _server_launch(family: str, gpu: str) -> str:
    """A server launched with no flags, as this process's hooks resolve it."""
    from sglang_nvfp4_patches.simulation.gpus import GPU_PROFILES
    from sglang_nvfp4_patches.simulation.moe_forward import LayerVerdict, run_first_moe_layer
    from sglang_nvfp4_patches.simulation.server_args import resolve

    record = current_record()
    if record is None:
        raise CheckFailed("no evidence record for this SGLang, so the patch cannot act")
    fact = record.facts[evidence_key(family, gpu)]
    state = EvidenceState(fact["state"])
    model_dir, profile = bundled_models()[family], GPU_PROFILES[gpu]
    published = resolve(model_dir, profile).moe_runner_backend
    if state is EvidenceState.LIVE and published != CUTLASS:
        raise CheckFailed(f"the evidence is live ({fact['detail']}), yet {published} is published")
    if state is not EvidenceState.LIVE and published != fact["published"]:
        raise CheckFailed(
            f"the evidence is {state.value}, yet {published} is published, not SGLang's "
            f"{fact['published']}"
        )
    layer = run_first_moe_layer(model_dir, profile)
    if layer is None:
        raise CheckFailed("no MoE layer was built for the bundled config")
    nothing_to_publish = (EvidenceState.NOT_AFFECTED, EvidenceState.NO_REMEDY)
    if state in nothing_to_publish and layer.verdict is not LayerVerdict.SERVES:
        raise NotApplicable(f"{fact['detail']}; published {published}, layer: {layer.detail}")
    if layer.verdict is not LayerVerdict.SERVES:
        raise CheckFailed(
            f"published {published}; the layer on {layer.runner} does not serve: "
            f"{layer.verdict.value}: {layer.detail}"
        )
    return f"published {published}; the layer on {layer.runner} serves: {layer.detail}"


def _given_flags_honoured() -> str:
    from sglang_nvfp4_patches.nvfp4_moe_runner.suspension import suspended
    from sglang_nvfp4_patches.simulation.gpus import GPU_PROFILES
    from sglang_nvfp4_patches.simulation.server_args import resolve

    checked = []
    for family, model_dir in bundled_models().items():
        for flags in GIVEN_FLAGS:
            patched = resolve(model_dir, GPU_PROFILES["sm120"], **flags)
            with suspended():
                unpatched = resolve(model_dir, GPU_PROFILES["sm120"], **flags)
            if patched != unpatched:
                raise CheckFailed(f"{family} with {flags}: {patched} instead of {unpatched}")
            checked.append(f"{family} {flags}: {patched.moe_runner_backend}")
    return "resolved as SGLang resolves them on SM120: " + "; ".join(checked)


def run_checks() -> list[CheckResult]:
    """Every check (call in a process where SGLang loaded the plugin)."""
    from sglang_nvfp4_patches.simulation.server_args import quiet_sglang

    with quiet_sglang():
        found: dict[str, Any] = {}

        def evidence() -> str:
            found.update(gather())
            return _evidence(found)

        results = [run_check(NAME, "evidence (no flags, SGLang as it ships)", evidence)]
        for family, gpu in SERVER_LAUNCHES:
            results.append(
                run_check(
                    NAME,
                    f"{family} ModelOpt NVFP4 MoE on {gpu}, no flags",
                    lambda family=family, gpu=gpu: _server_launch(family, gpu),
                )
            )
        results.append(
            run_check(NAME, "given --moe-runner-backend/--quantization", _given_flags_honoured)
        )
    return results
