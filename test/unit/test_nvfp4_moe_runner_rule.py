"""``nvfp4-moe-runner``'s decision, pure: which launches get ``flashinfer_cutlass`` published,
or are refused, from the launch's facts (any architecture: its MoE layer settings, launch line,
runner so far, GPU) and the evidence for those settings, GPU and launch line; and what a
layer run's verdicts say as evidence."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from sglang_nvfp4_patches.models import moe_settings
from sglang_nvfp4_patches.nvfp4_moe_runner.rule import (
    CUTLASS,
    NO_QUANTIZATION,
    STATE_REASONS,
    EvidenceKey,
    EvidenceState,
    LaunchFacts,
    decide,
    evidence_of,
    launch_name,
    launch_that_works,
    refusal,
)

SM120, SM121, SM100, SM110, SM90 = (12, 0), (12, 1), (10, 0), (11, 0), (9, 0)
SILU_K = "silu, top-k"


def launch(
    settings: str | None,
    checkpoint: str | None,
    quantization: str | None,
    runner: str | None,
    capability: tuple[int, int] | None,
) -> LaunchFacts:
    return LaunchFacts(settings, quantization, runner, capability, lambda: checkpoint)


PLAIN = launch(SILU_K, "modelopt_fp4", None, "auto", SM120)


def record(
    state: EvidenceState,
    settings: str = SILU_K,
    gpu: str = "sm120",
    launch_line: str = NO_QUANTIZATION,
    **others: EvidenceState,
) -> Any:
    found = {EvidenceKey(settings, gpu, launch_line): {"state": state.value, "detail": "why"}}
    for spelling, other in others.items():
        key = EvidenceKey(settings, gpu, launch_name(spelling))
        found[key] = {"state": other.value, "detail": f"{spelling} {other.value}"}
    return lambda: found


def never() -> Mapping[str, Any]:
    raise AssertionError("the evidence was read for a launch that does not need it")


@pytest.mark.parametrize(
    "facts",
    [
        launch(None, "modelopt_fp4", None, "auto", SM120),  # no MoE layer (a dense model)
        launch("gelu, top-k", "compressed-tensors", None, "auto", SM120),
        launch("gelu, top-k", None, None, "auto", SM120),  # BF16
        launch(SILU_K, "modelopt_fp4", None, "triton", SM120),  # --moe-runner-backend
        launch("gelu, top-k", "modelopt_fp4", None, "flashinfer_trtllm", SM100),  # override's
        launch(SILU_K, "modelopt_fp4", None, "auto", None),  # not a CUDA GPU
        launch(SILU_K, "modelopt_fp4", None, "auto", SM90),
        launch(SILU_K, "modelopt_fp4", None, "auto", SM110),  # not simulated here
    ],
)
def test_a_launch_the_patch_does_not_concern_is_left_without_reading_evidence(
    facts: LaunchFacts,
) -> None:
    decision = decide(facts, never)
    assert decision.runner is None and decision.state is None


def test_a_live_failure_publishes_cutlass() -> None:
    decision = decide(PLAIN, record(EvidenceState.LIVE))
    assert decision.runner == CUTLASS and decision.state is EvidenceState.LIVE
    assert decision.reason == "why"
    assert str(decision.key) == "silu, top-k on sm120, no --quantization"


@pytest.mark.parametrize(
    "state",
    [
        EvidenceState.UPSTREAM,
        EvidenceState.NOT_AFFECTED,
        EvidenceState.NO_REMEDY,
        EvidenceState.UNKNOWN,
        EvidenceState.NOT_COVERED,
    ],
)
def test_anything_but_a_live_failure_leaves_sglangs_runner(state: EvidenceState) -> None:
    decision = decide(PLAIN, record(state))
    assert decision.runner is None and decision.state is state and decision.instead is None


def test_evidence_is_per_settings_exact_gpu_and_launch_line() -> None:
    gemma_sm121 = launch("gelu, top-k", "modelopt_fp4", None, None, SM121)
    assert decide(gemma_sm121, record(EvidenceState.LIVE, "gelu, top-k", "sm121")).runner
    missing = decide(gemma_sm121, record(EvidenceState.LIVE, "gelu, top-k", "sm120"))
    assert missing.runner is None and missing.state is EvidenceState.NOT_COVERED
    other = decide(gemma_sm121, record(EvidenceState.LIVE, SILU_K, "sm121"))
    assert other.runner is None and other.state is EvidenceState.NOT_COVERED
    assert decide(PLAIN, lambda: None).state is EvidenceState.UNKNOWN  # no record at all


def test_the_model_card_launch_line_is_decided_by_its_own_evidence() -> None:
    card = launch(SILU_K, "modelopt_fp4", "modelopt_fp4", "auto", SM120)
    evidence = record(EvidenceState.NOT_AFFECTED, modelopt_fp4=EvidenceState.LIVE)
    decision = decide(card, evidence)
    assert decision.runner == CUTLASS
    assert str(decision.key) == "silu, top-k on sm120, --quantization modelopt_fp4"


def test_a_quantization_the_evidence_does_not_concern_is_sglangs() -> None:
    fp8 = launch(SILU_K, "modelopt_fp4", "fp8", "auto", SM120)
    decision = decide(fp8, record(EvidenceState.LIVE))
    assert decision.runner is None and decision.state is None
    assert "--quantization fp8" in decision.reason


def test_a_line_no_runner_serves_names_the_line_that_does() -> None:
    generic = launch(SILU_K, "modelopt_fp4", "modelopt", "auto", SM100)
    evidence = record(
        EvidenceState.LIVE,
        gpu="sm100",
        modelopt=EvidenceState.NO_REMEDY,
        modelopt_fp4=EvidenceState.LIVE,
    )
    decision = decide(generic, evidence)
    assert decision.runner is None and decision.state is EvidenceState.NO_REMEDY
    assert decision.instead == "--quantization modelopt_fp4"  # the nearest change of the line
    message = refusal(decision, "/models/q3", "0.5.23")
    assert message.startswith("/models/q3: launched with --quantization modelopt on SM100,")
    assert "(silu, top-k)" in message and "Launch it with --quantization modelopt_fp4" in message
    alone = record(EvidenceState.LIVE, gpu="sm100", modelopt=EvidenceState.NO_REMEDY)
    only_plain = decide(generic, alone)
    assert only_plain.instead == NO_QUANTIZATION
    assert "Launch it without --quantization" in refusal(only_plain, "m", "0.5.23")
    nothing = record(EvidenceState.NO_REMEDY, gpu="sm100", modelopt=EvidenceState.NO_REMEDY)
    assert decide(generic, nothing).instead is None


def test_the_way_out_never_names_a_line_that_fails_or_is_unknown() -> None:
    facts = record(
        EvidenceState.UNKNOWN,
        gpu="sm100",
        modelopt=EvidenceState.NO_REMEDY,
        modelopt_fp4=EvidenceState.NOT_COVERED,
    )()
    assert launch_that_works(facts, EvidenceKey(SILU_K, "sm100", "--quantization modelopt")) is None


def test_a_key_reads_as_the_messages_name_it() -> None:
    key = EvidenceKey("gelu, top-k", "sm121", "--quantization modelopt_fp4")
    assert str(key) == "gelu, top-k on sm121, --quantization modelopt_fp4"


@pytest.mark.parametrize(
    ("config", "key"),
    [
        ({"num_local_experts": 16, "num_experts_per_tok": 1}, "silu, top-1"),  # Llama 4 text
        ({"num_experts": 128, "num_experts_per_tok": 8, "hidden_act": "silu"}, "silu, top-k"),
        ({"n_routed_experts": 256, "num_experts_per_tok": 8}, "silu, top-k"),  # DeepSeek
        (
            {
                "text_config": {
                    "enable_moe_block": True,
                    "num_experts": 128,
                    "top_k_experts": 8,
                    "hidden_activation": "gelu_pytorch_tanh",
                }
            },
            "gelu, top-k",
        ),
        ({"num_experts": 8, "num_experts_per_tok": 2, "hidden_act": "relu2"}, "relu2, top-k"),
        ({"text_config": {"enable_moe_block": False, "num_experts": 128}}, None),  # dense Gemma
        ({"hidden_act": "silu", "intermediate_size": 1}, None),  # dense
        ({"num_experts": 1}, None),
        ({"num_experts": True}, None),
    ],
)
def test_moe_settings_are_read_off_any_architectures_fields(
    config: dict[str, Any], key: str | None
) -> None:
    found = moe_settings(config)
    assert (None if found is None else found.key) == key


def run(runner: str | None, verdict: str, detail: str = "d") -> dict[str, Any]:
    return {"runner": runner, "verdict": verdict, "detail": detail}


@pytest.mark.parametrize(
    ("published", "unpatched", "cutlass", "state"),
    [
        ("flashinfer_trtllm", None, None, EvidenceState.NOT_AFFECTED),  # SGLang's own pick
        ("auto", run(CUTLASS, "serves"), None, EvidenceState.UPSTREAM),
        ("auto", run("triton", "other kernel"), None, EvidenceState.NOT_AFFECTED),
        ("auto", run("flashinfer_trtllm", "fails"), run(CUTLASS, "serves"), EvidenceState.LIVE),
        (None, run("flashinfer_trtllm", "no kernel"), run(CUTLASS, "serves"), EvidenceState.LIVE),
        ("auto", run(CUTLASS, "wrong"), run(CUTLASS, "serves"), EvidenceState.LIVE),
        ("auto", run("x", "fails"), run(CUTLASS, "fails"), EvidenceState.NO_REMEDY),
        ("auto", run("x", "fails"), run(CUTLASS, "not simulated"), EvidenceState.UNKNOWN),
        ("auto", run("x", "fails"), None, EvidenceState.UNKNOWN),
        ("auto", run("x", "not simulated"), None, EvidenceState.UNKNOWN),
        ("auto", None, None, EvidenceState.UNKNOWN),
    ],
)
def test_what_the_layer_runs_show(
    published: str | None,
    unpatched: dict[str, Any] | None,
    cutlass: dict[str, Any] | None,
    state: EvidenceState,
) -> None:
    assert evidence_of(published, unpatched, cutlass) is state


def test_every_state_reads_as_one_sentence() -> None:
    assert set(STATE_REASONS) == set(EvidenceState)
    assert len(set(STATE_REASONS.values())) == len(EvidenceState)
