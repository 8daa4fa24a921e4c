"""A launch's layout in ``nvfp4-moe-runner``'s decision, pure: the layer fails when it is
built where its runner has no fused function for the all-to-all backend (the launch is then
refused, naming what works); a layout the release facts do not show keeps the one-GPU
decision and says so; an operator's runner is never weighed."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest

from sglang_nvfp4_patches.moe_layout import (
    Layout,
    LayoutFate,
    fate,
    shown_cell,
    shown_of,
)
from sglang_nvfp4_patches.nvfp4_moe_runner.rule import (
    CUTLASS,
    NO_QUANTIZATION,
    EvidenceKey,
    EvidenceState,
    LaunchFacts,
    decide,
    refusal,
)

# SGLang 0.5.23's registry, as the integration tests read it from SGLang itself.
REGISTRY = {
    "none": ("flashinfer_trtllm", CUTLASS, "flashinfer_cutedsl"),
    "flashinfer": ("flashinfer_trtllm", CUTLASS, "flashinfer_cutedsl"),
    "deepep": ("flashinfer_cutedsl",),
    "mooncake": (),
}


def registered(a2a: str, runner: str) -> bool | None:
    return runner in REGISTRY[a2a]


def runners_for(a2a: str) -> tuple[str, ...] | None:
    return REGISTRY[a2a]


def cannot_ask(*_args: Any) -> None:
    return None


TP_EP = frozenset({"tp", "ep"})


@pytest.mark.parametrize(
    ("record", "expected"),
    [
        (SimpleNamespace(), Layout()),
        (
            SimpleNamespace(tp_size=8, ep_size=8, moe_a2a_backend="deepep"),
            Layout(8, 8, a2a="deepep"),
        ),
        (SimpleNamespace(tp_size=4, dp_size=4, enable_dp_attention=True), Layout(4, attn_dp=4)),
        (SimpleNamespace(tp_size=4, dp_size=4, enable_dp_attention=False), Layout(4)),
        (SimpleNamespace(attn_dp_size=2, dp_size=4, enable_dp_attention=True), Layout(attn_dp=2)),
        (SimpleNamespace(pp_size=2, moe_a2a_backend=None, tp_size=None), Layout(pp=2)),
        (
            SimpleNamespace(moe_a2a_backend=SimpleNamespace(value="mooncake"), deepep_mode="auto"),
            Layout(a2a="mooncake", deepep_mode="auto"),
        ),
    ],
)
def test_layout_of_a_record(record: Any, expected: Layout) -> None:
    assert Layout.of(record) == expected


def test_dimensions_and_flags() -> None:
    layout = Layout(tp=8, ep=8, pp=2, attn_dp=8, a2a="deepep")
    assert layout.dimensions == ("tp", "ep", "pp", "attn-dp", "a2a-deepep")
    assert layout.flags == (
        "--tp-size 8 --ep-size 8 --pp-size 2 --attn-dp-size 8 --moe-a2a-backend deepep"
    )
    assert Layout().dimensions == () and Layout().flags == "one GPU"


def test_a_runner_without_a_fused_function_fails_naming_what_works() -> None:
    found = fate(Layout(8, 8, a2a="deepep"), CUTLASS, registered, runners_for, TP_EP)
    assert found.failure == (
        "the flashinfer_cutlass MoE runner has no fused function for --moe-a2a-backend deepep "
        "in SGLang's registry"
    )
    assert found.instead is not None
    assert "only for flashinfer_cutedsl (--moe-runner-backend), not shown serving" in found.instead
    assert found.instead.endswith(
        "--moe-a2a-backend none instead (--tp-size 8 --ep-size 8 is shown serving on CPU)"
    )
    unshown = fate(Layout(8, 8, a2a="deepep"), CUTLASS, registered, runners_for, frozenset())
    assert unshown.instead is not None and unshown.instead.endswith("not shown on CPU either)")
    alone = fate(Layout(a2a="mooncake"), None, registered, runners_for, TP_EP)
    assert alone.failure is not None and alone.failure.startswith("every MoE runner")
    assert alone.instead is not None and "registers no runner's" in alone.instead
    assert alone.instead.endswith("(one GPU is shown serving on CPU)")


def test_a_runner_with_a_fused_function_keeps_the_decision() -> None:
    shown = TP_EP | {"a2a-flashinfer"}
    assert fate(Layout(4, 4, a2a="flashinfer"), CUTLASS, registered, runners_for, shown) == (
        LayoutFate()
    )
    # SGLang picks the runner itself and one is registered there: not shown, never refused
    picked = fate(Layout(a2a="deepep"), None, registered, runners_for, TP_EP)
    assert (
        picked.failure is None and picked.not_shown == "--moe-a2a-backend deepep not shown on CPU"
    )
    # A registry this release lacks refuses nothing
    blind = fate(Layout(a2a="deepep"), CUTLASS, cannot_ask, cannot_ask, TP_EP)
    assert blind.failure is None and blind.not_shown is not None


@pytest.mark.parametrize(
    ("layout", "shown", "not_shown"),
    [
        (Layout(8), TP_EP, None),
        (Layout(8, 8), TP_EP, None),
        (Layout(8, attn_dp=8), TP_EP, "attention data parallelism not shown on CPU"),
        (Layout(2, pp=2), frozenset({"tp"}), "pipeline parallelism not shown on CPU"),
        (Layout(8), None, "the release facts have no layouts for this SGLang"),
        (Layout(), None, None),
    ],
)
def test_a_layout_not_shown_says_which_part(
    layout: Layout, shown: frozenset[str] | None, not_shown: str | None
) -> None:
    assert fate(layout, CUTLASS, registered, runners_for, shown).not_shown == not_shown


def test_the_cell_round_trips() -> None:
    assert shown_cell(["tp", "ep", "tp"]) == "ep,tp"
    assert shown_of("ep,tp") == TP_EP
    assert shown_cell([]) == "-" and shown_of("-") == frozenset()
    assert shown_of(None) is None


def _facts(state: EvidenceState, layout: Layout, **changes: Any) -> tuple[LaunchFacts, Any]:
    facts = LaunchFacts(
        "silu, top-k",
        None,
        "auto",
        (12, 0),
        lambda: "modelopt_fp4",
        layout=layout,
        own_runner=lambda: None,
        registered=registered,
        runners_for=runners_for,
        shown=lambda: TP_EP,
    )
    key = EvidenceKey("silu, top-k", "sm120", NO_QUANTIZATION)
    found = {key: {"state": state.value, "detail": "why"}}
    return replace(facts, **changes), lambda: found


def test_decide_reads_the_layout() -> None:
    facts, evidence = _facts(EvidenceState.LIVE, Layout(8, 8))
    assert decide(facts, evidence).runner == CUTLASS
    facts, evidence = _facts(EvidenceState.LIVE, Layout(8, 8, a2a="deepep"))
    refused = decide(facts, evidence)
    assert refused.runner is None and refused.layout_refusal is not None
    message = refusal(refused, "m", "0.5.23", facts.layout)
    assert message.startswith(
        "m: launched with --tp-size 8 --ep-size 8 --moe-a2a-backend deepep on SM120, SGLang "
        "0.5.23's ModelOpt NVFP4 MoE layer (silu, top-k) fails when it is built: the "
        "flashinfer_cutlass MoE runner"
    )
    assert message.endswith(
        "--moe-a2a-backend none instead (--tp-size 8 --ep-size 8 is shown "
        "serving on CPU); refused before the weights load."
    )
    facts, evidence = _facts(EvidenceState.LIVE, Layout(8, attn_dp=8))
    kept = decide(facts, evidence)
    assert kept.runner == CUTLASS and kept.not_shown == (
        "attention data parallelism not shown on CPU"
    )


def test_only_what_the_patch_publishes_is_said_not_shown() -> None:
    facts, evidence = _facts(EvidenceState.NOT_AFFECTED, Layout(8, attn_dp=8))
    decision = decide(facts, evidence)
    assert (decision.runner, decision.not_shown, decision.layout_refusal) == (None, None, None)


def test_sglangs_own_runner_is_weighed_where_the_patch_publishes_none() -> None:
    facts, evidence = _facts(
        EvidenceState.NOT_AFFECTED, Layout(4, a2a="mooncake"), own_runner=lambda: CUTLASS
    )
    decision = decide(facts, evidence)
    assert decision.runner is None and decision.layout_refusal is not None
    assert "flashinfer_cutlass MoE runner" in decision.layout_refusal


def test_an_operators_runner_or_one_gpu_never_asks_the_layout() -> None:
    def planted() -> Any:
        raise AssertionError("asked")

    facts, evidence = _facts(
        EvidenceState.LIVE,
        Layout(8, a2a="deepep"),
        runner=CUTLASS,
        own_runner=planted,
        shown=planted,
    )
    assert decide(facts, evidence).layout_refusal is None
    facts, evidence = _facts(EvidenceState.LIVE, Layout(), own_runner=lambda: None, shown=planted)
    assert decide(facts, evidence).runner == CUTLASS


def test_where_sglang_publishes_a_runner_itself_the_patch_stands_down() -> None:
    """Asked only where the patch would act (a model's later pass may publish a runner)."""
    facts, evidence = _facts(EvidenceState.LIVE, Layout(), own_runner=lambda: "triton")
    decision = decide(facts, evidence)
    assert decision.runner is None and decision.reason == "SGLang publishes triton itself"
    facts, evidence = _facts(EvidenceState.NOT_AFFECTED, Layout(), own_runner=_never)
    assert decide(facts, evidence).runner is None


def _never() -> Any:
    raise AssertionError("asked where the patch does not act")
