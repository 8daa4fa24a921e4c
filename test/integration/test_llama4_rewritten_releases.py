"""Simulated next releases whose method rejections are spelled as refactors spell them: an
``if``/``raise``, a helper method, a local alias, a derived value checked by a module
function (ModelOpt and compressed-tensors), one the plugin cannot read, and a runner whose
pre-scale has another name. Each runs with ``SGLANG_NVFP4_PATCHES_UNTESTED=apply``: ``doctor``
first, then ``verify``'s Llama 4 checks, in one fresh process.

What must hold on every one: where ``doctor`` says a half is lifted or upstream, ``verify``
holds for it; where ``verify`` fails, ``doctor`` exits 1. "none in this release" is said only
where the code shows the flag is no longer rejected.
"""

from __future__ import annotations

from typing import Any

import pytest

from support import SCRIPTS, result_of
from support.edited_sglang import (
    COMPRESSED_TENSORS,
    CUTLASS_RUNNER,
    MODELOPT,
    NEXT_RELEASE,
    make_edited_copy,
    modelopt_assert_removed,
    rejection_as_if_raise,
    rejection_in_a_helper,
    rejection_out_of_sight,
    rejection_through_a_derived_value,
    rejection_through_an_alias,
    runner_prescale_renamed,
    runner_rejects_again,
)
from support.forkserver import server

# nvfp4-moe-runner has no record for these edited sources (unknown until verify records
# them): these releases are about llama4-router-weight, which alone decides doctor here.
OPT_IN = {
    "SGLANG_NVFP4_PATCHES_UNTESTED": "apply",
    "SGLANG_NVFP4_PATCHES_DISABLE": "nvfp4-moe-runner",
}
PROBE = str(SCRIPTS / "next_release_probe.py")
LLAMA4 = "llama4-router-weight"
MODELOPT_TOP1 = "ModelOpt NVFP4 top-1 with the flag"
CT_TOP1 = "compressed-tensors NVFP4 top-1 with the flag"

RELEASES = {
    "if/raise": {MODELOPT: rejection_as_if_raise, COMPRESSED_TENSORS: rejection_as_if_raise},
    "helper and derived value": {
        MODELOPT: rejection_in_a_helper,
        COMPRESSED_TENSORS: rejection_through_a_derived_value,
    },
    "alias": {MODELOPT: rejection_through_an_alias},
    "out of sight": {MODELOPT: rejection_out_of_sight},
    "assert removed": {MODELOPT: modelopt_assert_removed},
    "pre-scale renamed": {CUTLASS_RUNNER: runner_prescale_renamed},
    "runner rejects again": {CUTLASS_RUNNER: runner_rejects_again},
}


@pytest.fixture(scope="module")
def agreed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    fork = server()
    started = {}
    for name, edits in RELEASES.items():
        copy = make_edited_copy(tmp_path_factory.mktemp("rewritten"), edits, NEXT_RELEASE)
        started[name] = fork.start([PROBE, str(copy), "agree"], OPT_IN)
    return {name: result_of(child.wait(timeout=300)) for name, child in started.items()}


def checks_of(result: dict[str, Any]) -> dict[str, dict[str, str]]:
    return {check["check"]: check for check in result["verify"]}


@pytest.mark.parametrize("name", [n for n in RELEASES if n != "out of sight"])
def test_a_rejection_in_any_spelling_is_lifted_and_verify_holds(
    agreed: dict[str, Any], name: str
) -> None:
    result = agreed[name]
    llama4 = result["doctor"][LLAMA4]
    assert result["doctor_exit"] == 0 and llama4["status"] == "applied", llama4
    checks = checks_of(result)
    assert {check["outcome"] for check in checks.values()} == {"held"}, checks
    assert "output = expert(x*w)" in checks[MODELOPT_TOP1]["reason"]
    assert "output = expert(x*w)" in checks[CT_TOP1]["reason"]


@pytest.mark.parametrize(
    ("name", "modelopt", "compressed_tensors"),
    [
        ("if/raise", "lifted", "lifted"),
        ("helper and derived value", "lifted", "lifted"),
        ("alias", "lifted", "lifted"),
        ("assert removed", "none in this release", "lifted"),
        ("pre-scale renamed", "lifted", "lifted"),
        ("runner rejects again", "lifted", "lifted"),
    ],
)
def test_doctor_names_what_each_half_does(
    agreed: dict[str, Any], name: str, modelopt: str, compressed_tensors: str
) -> None:
    reason = agreed[name]["doctor"][LLAMA4]["reason"]
    assert f"ModelOpt NVFP4 rejection: {modelopt}" in reason, reason
    assert f"compressed-tensors NVFP4 rejection: {compressed_tensors}" in reason, reason


def test_positive_evidence_for_upstream_names_it(agreed: dict[str, Any]) -> None:
    reason = agreed["assert removed"]["doctor"][LLAMA4]["reason"]
    assert (
        "ModelOpt NVFP4 rejection: none in this release (ModelOptNvFp4FusedMoEMethod.apply "
        "does not reject apply_router_weight_on_input: on the CUTLASS runner it reads it "
        "nowhere)"
    ) in reason


def test_a_rejection_it_cannot_read_is_unknown_and_doctor_exits_1(agreed: dict[str, Any]) -> None:
    result = agreed["out of sight"]
    llama4 = result["doctor"][LLAMA4]
    assert result["doctor_exit"] == 1 and llama4["status"] == "unknown", llama4
    assert llama4["reason"].startswith(
        "cannot tell whether ModelOptNvFp4FusedMoEMethod.apply still rejects "
        "apply_router_weight_on_input: it hands self.moe_runner_config to _CHECKS[0], which "
        "this reader cannot read at modelopt_quant.py:"
    ), llama4["reason"]
    assert "left as SGLang ships it; run `sglang-nvfp4-patches verify`" in llama4["reason"]
    assert "none in this release" not in llama4["reason"]
    checks = checks_of(result)
    # SGLang left as it ships: its own check still fires, and verify says so
    assert checks[MODELOPT_TOP1]["outcome"] == "FAILED"
    assert "AssertionError" in checks[MODELOPT_TOP1]["reason"]
    assert checks[CT_TOP1]["outcome"] == "held"


def test_a_renamed_runner_prescale_applies_the_weight_once(agreed: dict[str, Any]) -> None:
    """Our pre-scale wraps the renamed one and hands it a flag-free config: the kernel gets
    x*w (not x*w*w) and unit scales, which verify's top-1 check reads off the kernel call."""
    result = agreed["pre-scale renamed"]
    reason = result["doctor"][LLAMA4]["reason"]
    assert reason.startswith("runner pre-scale: patched (the top-1 pre-scale is ours, and it ")
    assert "the weight is applied once" in reason
    assert "applied once, on the input" in checks_of(result)[MODELOPT_TOP1]["reason"]


def test_a_runner_that_rejects_the_flag_again_gets_our_prescale(agreed: dict[str, Any]) -> None:
    reason = agreed["runner rejects again"]["doctor"][LLAMA4]["reason"]
    assert reason.startswith(
        "runner pre-scale: patched (the top-1 pre-scale is ours, and it hands SGLang's fused "
        "function a config without the flag: the weight is applied once, also where SGLang "
        "pre-scales under a name this plugin does not know): its fused function "
        "fused_experts_none_to_flashinfer_cutlass still rejects the flag (raise "
        "NotImplementedError at flashinfer_cutlass.py:"
    ), reason


def test_doctor_and_verify_never_disagree(agreed: dict[str, Any]) -> None:
    for name, result in agreed.items():
        failed = [c for c in result["verify"] if c["outcome"] == "FAILED"]
        status = result["doctor"][LLAMA4]["status"]
        if failed:
            assert result["doctor_exit"] == 1, (name, failed)
        if status in ("applied", "already upstream"):
            assert not failed, (name, failed)
