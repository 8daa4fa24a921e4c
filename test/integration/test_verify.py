"""``verify`` on the installed SGLang: each check holds, and the command says so.

The checks run in this process (SGLang loaded the plugin here, as in a server); the command a
user types (fresh processes, ``--json``) runs in ``test_third_patch.py``, beside a stand-in
third patch, and its text form in ``test_verify_result.py``. What they fail on
is shown on simulated releases in ``test_next_release.py`` (the double-weighting runner, the
runner without its pre-scale) and here by planting a wrong ``MoeRunnerConfig`` view.
"""

from __future__ import annotations

import pytest

from sglang_nvfp4_patches.check_result import Outcome, run_check
from sglang_nvfp4_patches.gemma4_attention import commands as gemma4
from sglang_nvfp4_patches.gemma4_attention.rule import KvScaleHandoff, KvScaleVerdict
from sglang_nvfp4_patches.gemma4_attention.rule_state import HOW_TO_CHECK, NO_FACTS
from sglang_nvfp4_patches.llama4_router_weight import checks as llama4
from sglang_nvfp4_patches.llama4_router_weight import method_lift
from sglang_nvfp4_patches.llama4_router_weight.commands import current_state
from sglang_nvfp4_patches.llama4_router_weight.rule import COMPRESSED_TENSORS
from sglang_nvfp4_patches.supported_releases import sglang_version
from support.release import recorded_llama4_state


@pytest.mark.release_matrix
def test_every_gemma4_check_holds() -> None:
    results = gemma4.run_checks()
    assert [r.outcome for r in results] == [Outcome.HELD] * 3, [r.line() for r in results]
    verdict, default, explicit = results
    # a tested release: its row of release facts says it, nothing derives it
    handoff = verdict.reason.split("FP8 KV-cache path: ")[1].split(",")[0]
    assert handoff in ("applied", "dropped")
    assert verdict.reason.endswith(f"{handoff}, recorded by CI for SGLang {sglang_version()}")
    assert f"as the verdict ({handoff})" in default.reason
    assert "stays trtllm_mha" in explicit.reason


@pytest.mark.release_matrix
def test_every_llama4_check_holds_or_has_nothing_to_exercise() -> None:
    results = llama4.run_checks()
    outcomes = {r.check: r.outcome for r in results}
    assert Outcome.FAILED not in outcomes.values(), [r.line() for r in results]
    if "ModelOpt NVFP4 top-1 with the flag" in outcomes:  # a release with the CUTLASS runner
        assert outcomes["ModelOpt NVFP4 top-1 with the flag"] is Outcome.HELD
    if recorded_llama4_state(COMPRESSED_TENSORS.part) == "lifted, wrong":
        # verify says what doctor says: refused when it is built, never served
        top1 = f"{COMPRESSED_TENSORS.label} top-1 with the flag"
        reasons = {r.check: r.reason for r in results}
        for check in (top1, f"{top1}, as a server loads it"):
            assert reasons[check].startswith("refused when"), (check, reasons[check])
        assert "compressed-tensors NVFP4 rejection: refused when the layer is built (" in (
            current_state().reason
        )


@pytest.mark.release_matrix
def test_a_lift_that_leaves_the_flag_on_the_method_fails_the_top1_checks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Planted: the hook lifts nothing (the method's own check stays)."""
    monkeypatch.setattr(method_lift, "without_router_weight_on_input", lambda config: config)
    results = {r.check: r for r in llama4.run_checks()}
    top1 = results.get("ModelOpt NVFP4 top-1 with the flag")
    if top1 is None or top1.outcome is Outcome.NOT_APPLICABLE:
        pytest.skip("not applicable: this SGLang has no FlashInfer CUTLASS MoE runner")
    assert top1.outcome is Outcome.FAILED
    assert "apply_router_weight_on_input" in top1.reason


def test_with_no_row_the_verdict_check_has_nothing_to_show_and_says_how_to_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Sources no row has (an untested release, edited sources): nothing derives the verdict."""
    unknown = KvScaleVerdict(KvScaleHandoff.UNKNOWN, NO_FACTS)
    monkeypatch.setattr(gemma4, "kv_scale_verdict", lambda: unknown)
    result = run_check(gemma4.NAME, "root-cause verdict", gemma4._verdict)
    assert result.outcome is Outcome.NOT_APPLICABLE
    assert result.reason.startswith(f"root cause unknown, counted as live: {NO_FACTS}")
    assert HOW_TO_CHECK in result.reason
