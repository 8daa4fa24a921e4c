"""Simulated next releases that rewrite what the plugin acts on: ModelOpt's assert removed, the
runner's pre-scale renamed, the runner rejecting the flag again; a method rejection as a
``match`` case, a method or property of ``MoeRunnerConfig``, a decorator, a predicate method, a
static method of another class, the check moved into ``process_weights_after_loading``, and a
runner that stops pre-scaling while ModelOpt pre-scales by itself. Each runs with
``SGLANG_NVFP4_PATCHES_UNTESTED=apply``: ``doctor`` first, then ``verify``'s Llama 4 checks,
in one fresh process; then ``doctor`` alone in a fresh process (reading the record ``verify``
kept), and ``verify`` with the patch off.

What must hold on every one: with no record for its sources, ``doctor`` says ``unknown`` and
exits 1 until ``verify`` has run; where ``doctor`` says a half is lifted or upstream, ``verify``
holds for it; where ``verify`` fails, ``doctor`` exits 1. "none in this release" and
"upstream" are said only where ``verify``'s record shows SGLang's own layer serving.
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
    RUNNER_BASE,
    config_checks_itself,
    make_edited_copy,
    modelopt_assert_removed,
    modelopt_prescales_itself,
    rejection_as_a_config_method,
    rejection_at_load,
    rejection_by_a_predicate,
    rejection_in_a_decorator,
    rejection_in_a_match_case,
    rejection_in_another_class,
    rejection_through_a_config_property,
    runner_prescale_renamed,
    runner_rejects_again,
    runner_stops_prescaling,
)
from support.forkserver import server

# nvfp4-moe-runner has no record for these edited sources (unknown until verify records
# them): these releases are about llama4-router-weight, which alone decides doctor here.
OPT_IN = {
    "SGLANG_NVFP4_PATCHES_UNTESTED": "apply",
    "SGLANG_NVFP4_PATCHES_DISABLE": "nvfp4-moe-runner",
}
PATCH_OFF = {**OPT_IN, "SGLANG_NVFP4_PATCHES_DISABLE": "nvfp4-moe-runner,llama4-router-weight"}
PROBE = str(SCRIPTS / "next_release_probe.py")
LLAMA4 = "llama4-router-weight"
RECORDS = "SGLANG_NVFP4_PATCHES_RECORDS"
MODELOPT_TOP1 = "ModelOpt NVFP4 top-1 with the flag"
CT_TOP1 = "compressed-tensors NVFP4 top-1 with the flag"
AS_SERVED = ", as a server loads it"

RELEASES = {
    "assert removed": {MODELOPT: modelopt_assert_removed},
    "pre-scale renamed": {CUTLASS_RUNNER: runner_prescale_renamed},
    "runner rejects again": {CUTLASS_RUNNER: runner_rejects_again},
}
# issue 37: the seven kinds, each where its layer fails unless the plugin acts
REWRITES = {
    "match case": {MODELOPT: rejection_in_a_match_case},
    "config method and property": {
        RUNNER_BASE: config_checks_itself,
        MODELOPT: rejection_as_a_config_method,
        COMPRESSED_TENSORS: rejection_through_a_config_property,
    },
    "decorator": {MODELOPT: rejection_in_a_decorator},
    "predicate": {COMPRESSED_TENSORS: rejection_by_a_predicate},
    "another class": {
        MODELOPT: rejection_in_another_class,
        COMPRESSED_TENSORS: rejection_in_another_class,
    },
    "at load": {MODELOPT: rejection_at_load},
    "method pre-scales, runner stops": {
        CUTLASS_RUNNER: runner_stops_prescaling,
        MODELOPT: modelopt_prescales_itself,
    },
}
ALL = {**RELEASES, **REWRITES}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Per release: ``agree`` (doctor, then verify, one process), then ``after`` (doctor in a
    fresh process, with the record verify kept) and, for the method rewrites, ``off`` (verify's
    Llama 4 checks alone, with the patch off). Each release keeps its records in its own
    directory, and its processes fork from one zygote that imported the copy's modules."""
    copies, records, zygotes, started = {}, {}, {}, {}
    for name, edits in ALL.items():
        copies[name] = make_edited_copy(tmp_path_factory.mktemp("rewritten"), edits, NEXT_RELEASE)
        records[name] = {RECORDS: str(tmp_path_factory.mktemp("records"))}
        zygotes[name] = server().zygote(copies[name])
    for name, zygote in zygotes.items():
        started[name] = zygote.start(
            [PROBE, str(copies[name]), "agree"], {**OPT_IN, **records[name]}
        )
    done = {name: {"agree": result_of(c.wait(timeout=600))} for name, c in started.items()}
    later = {}
    for name, zygote in zygotes.items():
        later[name, "after"] = zygote.start(
            [PROBE, str(copies[name]), "doctor"], {**OPT_IN, **records[name]}
        )
        if name in REWRITES:  # only the method rewrites are asked what verify says with it off
            later[name, "off"] = zygote.start(
                [PROBE, str(copies[name]), f"verify-{LLAMA4}"],
                {**PATCH_OFF, RECORDS: str(tmp_path_factory.mktemp("records"))},
            )
    for (name, what), child in later.items():
        result = result_of(child.wait(timeout=600))
        done[name][what] = {"verify": result} if what == "off" else result
    for zygote in zygotes.values():
        zygote.close()
    return done


@pytest.fixture(scope="module")
def agreed(runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {name: run["agree"] for name, run in runs.items()}


def checks_of(result: dict[str, Any]) -> dict[str, dict[str, str]]:
    return {check["check"]: check for check in result["verify"]}


@pytest.mark.parametrize("name", list(ALL))
def test_without_a_record_each_method_is_unknown_and_doctor_exits_1(
    agreed: dict[str, Any], name: str
) -> None:
    """Nothing reads SGLang's code: each method is ``cannot tell`` (lifted all the same, which is
    safe where it does not reject), and the runner gets our pre-scale."""
    result = agreed[name]
    llama4 = result["doctor"][LLAMA4]
    assert result["doctor_exit"] == 1 and llama4["status"] == "unknown", llama4
    for label in ("ModelOpt NVFP4", "compressed-tensors NVFP4"):
        assert f"{label} rejection: cannot tell (lifted, " in llama4["reason"], llama4["reason"]
    assert "none in this release" not in llama4["reason"]
    assert "runner pre-scale: patched" in llama4["reason"]


def test_a_removed_assert_is_unknown_until_verify_shows_sglang_serving(
    runs: dict[str, Any],
) -> None:
    """The assert removed: unknown until verify's record shows SGLang's own layer serving, and
    only then is it "none in this release"."""
    first, after = runs["assert removed"]["agree"], runs["assert removed"]["after"]
    assert first["doctor_exit"] == 1 and first["doctor"][LLAMA4]["status"] == "unknown"
    assert first["doctor"][LLAMA4]["reason"].startswith(
        "cannot tell whether ModelOptNvFp4FusedMoEMethod.apply still rejects "
        "apply_router_weight_on_input: no record shows SGLang's own layer serving top-1 with "
        "the flag; "
    ), first["doctor"][LLAMA4]["reason"]
    assert after["doctor_exit"] == 0, after
    assert (
        "ModelOpt NVFP4 rejection: none in this release (ModelOptNvFp4FusedMoEMethod's own "
        "layer serves with top-1 and apply_router_weight_on_input (SGLang's own layer serves "
        "top-1 with the flag; shown on CPU by verify on this machine)"
    ) in after["doctor"][LLAMA4]["reason"]
    assert "shown on CPU by verify on this machine" in after["doctor"][LLAMA4]["reason"]


def test_a_renamed_runner_prescale_applies_the_weight_once(agreed: dict[str, Any]) -> None:
    """Our pre-scale wraps the renamed one and hands it a flag-free config: the kernel gets
    x*w (not x*w*w) and unit scales, which verify's top-1 check reads off the kernel call."""
    result = agreed["pre-scale renamed"]
    reason = result["doctor"][LLAMA4]["reason"]
    assert "runner pre-scale: patched (the top-1 pre-scale is ours, and it " in reason
    assert "the weight is applied once" in reason
    assert "applied once, on the input" in checks_of(result)[MODELOPT_TOP1]["reason"]


def test_a_runner_that_rejects_the_flag_again_gets_our_prescale(runs: dict[str, Any]) -> None:
    """verify's record shows SGLang's own fused function not serving: ours stays."""
    checks = checks_of(runs["runner rejects again"]["agree"])
    assert "applied once, on the input" in checks[MODELOPT_TOP1]["reason"], checks
    reason = runs["runner rejects again"]["after"]["doctor"][LLAMA4]["reason"]
    assert reason.startswith(
        "runner pre-scale: patched (the top-1 pre-scale is ours, and it hands SGLang's fused "
        "function a config without the flag: the weight is applied once, also where SGLang "
        "pre-scales under a name this plugin does not know): its registered fused function "
        "does not serve the flag ("
    ), reason


def test_doctor_and_verify_never_disagree(runs: dict[str, Any]) -> None:
    """Before verify kept its record and after, in a fresh process."""
    for name, run in runs.items():
        failed = [c for c in run["agree"]["verify"] if c["outcome"] == "FAILED"]
        for doctor in (run["agree"], run["after"]):
            status = doctor["doctor"][LLAMA4]["status"]
            if failed:
                assert doctor["doctor_exit"] == 1, (name, failed)
            if status in ("applied", "already upstream"):
                assert not failed, (name, failed)


REWRITTEN_HALF = {
    "match case": "ModelOpt NVFP4",
    "config method and property": "compressed-tensors NVFP4",
    "decorator": "ModelOpt NVFP4",
    "predicate": "compressed-tensors NVFP4",
    "another class": "compressed-tensors NVFP4",
    "at load": "ModelOpt NVFP4",
    "method pre-scales, runner stops": "ModelOpt NVFP4",
}


@pytest.mark.parametrize("name", [n for n in REWRITES if n != "at load"])
def test_a_rewritten_rejection_is_lifted_and_verify_holds(runs: dict[str, Any], name: str) -> None:
    checks = checks_of(runs[name]["agree"])
    assert {check["outcome"] for check in checks.values()} == {"held"}, checks
    for check in (MODELOPT_TOP1, CT_TOP1, f"{MODELOPT_TOP1}{AS_SERVED}"):
        assert "output = expert(x*w)" in checks[check]["reason"], checks[check]


@pytest.mark.parametrize("name", list(REWRITES))
def test_with_the_patch_off_verify_fails(runs: dict[str, Any], name: str) -> None:
    checks = checks_of(runs[name]["off"])
    failed = {check for check, result in checks.items() if result["outcome"] == "FAILED"}
    assert failed & {MODELOPT_TOP1, CT_TOP1}, checks


def test_a_check_moved_into_weight_processing_fails_verify_with_sglangs_message(
    runs: dict[str, Any],
) -> None:
    check = checks_of(runs["at load"]["agree"])[f"{MODELOPT_TOP1}{AS_SERVED}"]
    assert check["outcome"] == "FAILED", check
    assert check["reason"] == (
        "the layer fails: when its weights are processed: NotImplementedError: "
        "apply_router_weight_on_input is not supported for Flashinfer"
    ), check
    after = runs["at load"]["after"]
    llama4 = after["doctor"][LLAMA4]
    assert after["doctor_exit"] == 1 and llama4["status"] == "failed", llama4
    assert (
        "the ModelOpt NVFP4 layer fails with top-1 and apply_router_weight_on_input, lifted or not"
        in llama4["reason"]
    )


@pytest.mark.parametrize(
    "name", [n for n in REWRITES if n not in ("at load", "method pre-scales, runner stops")]
)
def test_after_verify_a_rewritten_rejection_reads_lifted_as_shown(
    runs: dict[str, Any], name: str
) -> None:
    after = runs[name]["after"]
    llama4 = after["doctor"][LLAMA4]
    assert after["doctor_exit"] == 0 and llama4["status"] == "applied", llama4
    assert f"{REWRITTEN_HALF[name]} rejection: lifted" in llama4["reason"]
    assert llama4["reason"].startswith("runner pre-scale: upstream;"), llama4["reason"]


def test_a_method_that_prescales_itself_stands_down_on_our_runner_prescale(
    runs: dict[str, Any],
) -> None:
    """The runner stops pre-scaling (its helper still works alone), ModelOpt pre-scales by
    itself, compressed-tensors keeps its rejection: the runner is not shown to pre-scale, so
    ours wraps it, and compressed-tensors' lifted layer computes expert(x*w); ModelOpt's own
    layer is shown to serve on that runner."""
    after = runs["method pre-scales, runner stops"]["after"]
    reason = after["doctor"][LLAMA4]["reason"]
    assert after["doctor_exit"] == 0, after
    assert reason.startswith(
        "runner pre-scale: patched (the top-1 pre-scale is ours, and it hands SGLang's fused "
        "function a config without the flag: the weight is applied once, also where SGLang "
        "pre-scales under a name this plugin does not know): its registered fused function "
        "does not serve the flag ("
    ), reason
    assert "ModelOpt NVFP4 rejection: none in this release" in reason
    assert "compressed-tensors NVFP4 rejection: lifted" in reason
