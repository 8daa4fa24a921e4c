"""``nvfp4-moe-runner``'s decision, pure: which launches get ``flashinfer_cutlass`` published,
from the launch's facts and the evidence for its model family and GPU; and what a layer run's
verdicts say as evidence."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from sglang_nvfp4_patches.nvfp4_moe_runner.rule import (
    CUTLASS,
    EvidenceState,
    LaunchFacts,
    decide,
    evidence_key,
    evidence_of,
)

SM120, SM121, SM100, SM110, SM90 = (12, 0), (12, 1), (10, 0), (11, 0), (9, 0)


def launch(
    family: str | None,
    checkpoint: str | None,
    quantization: str | None,
    runner: str | None,
    capability: tuple[int, int] | None,
) -> LaunchFacts:
    return LaunchFacts(family, quantization, runner, capability, lambda: checkpoint)


PLAIN = launch("Llama 4", "modelopt_fp4", None, "auto", SM120)


def record(state: EvidenceState, family: str = "Llama 4", gpu: str = "sm120") -> Any:
    return lambda: {evidence_key(family, gpu): {"state": state.value, "detail": "why"}}


def never() -> Mapping[str, Any]:
    raise AssertionError("the evidence was read for a launch that does not need it")


@pytest.mark.parametrize(
    "facts",
    [
        launch(None, "modelopt_fp4", None, "auto", SM120),  # not Llama 4 / Gemma 4 MoE
        launch("Gemma 4", "compressed-tensors", None, "auto", SM120),
        launch("Gemma 4", None, None, "auto", SM120),  # BF16
        launch("Llama 4", "modelopt_fp4", "modelopt_fp4", "auto", SM120),  # --quantization
        launch("Llama 4", "modelopt_fp4", None, "triton", SM120),  # --moe-runner-backend
        launch("Gemma 4", "modelopt_fp4", None, "flashinfer_trtllm", SM100),  # SGLang's
        launch("Llama 4", "modelopt_fp4", None, "auto", None),  # not a CUDA GPU
        launch("Llama 4", "modelopt_fp4", None, "auto", SM90),
        launch("Llama 4", "modelopt_fp4", None, "auto", SM110),  # not simulated here
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


@pytest.mark.parametrize(
    "state",
    [
        EvidenceState.UPSTREAM,
        EvidenceState.NOT_AFFECTED,
        EvidenceState.NO_REMEDY,
        EvidenceState.UNKNOWN,
    ],
)
def test_anything_but_a_live_failure_leaves_sglangs_runner(state: EvidenceState) -> None:
    decision = decide(PLAIN, record(state))
    assert decision.runner is None and decision.state is state


def test_evidence_is_per_family_and_exact_gpu() -> None:
    gemma_sm121 = launch("Gemma 4", "modelopt_fp4", None, None, SM121)
    assert decide(gemma_sm121, record(EvidenceState.LIVE, "Gemma 4", "sm121")).runner == CUTLASS
    missing = decide(gemma_sm121, record(EvidenceState.LIVE, "Gemma 4", "sm120"))
    assert missing.runner is None and missing.state is EvidenceState.UNKNOWN
    assert decide(PLAIN, lambda: None).state is EvidenceState.UNKNOWN  # no record at all


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
    assert evidence_of(published, unpatched, cutlass)[0] is state


def test_a_live_failure_names_sglangs_error_and_the_runner_shown_to_serve() -> None:
    state, detail = evidence_of(
        "auto",
        run("flashinfer_trtllm", "fails", "at the first forward: AttributeError: g1_scale_c"),
        run(CUTLASS, "serves", "output = expert(x*w)"),
    )
    assert state is EvidenceState.LIVE
    assert "on the flashinfer_trtllm runner it builds" in detail
    assert "AttributeError: g1_scale_c" in detail and "output = expert(x*w)" in detail
