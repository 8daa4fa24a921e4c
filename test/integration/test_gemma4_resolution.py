"""Gemma 4 attention default through SGLang's own resolution, GPU simulated, in this process.

The plugin was loaded by ``load_plugins()`` (conftest); the rule stands where the release put
it (``as loaded``: fixed on 0.5.14+, live on 0.5.12.x/0.5.13.x). ``forced`` installs it the
way ``SGLANG_NVFP4_PATCHES_FORCE=gemma4-attention`` does, so the rule's wiring is checked on
every release; the environment variable itself and the live branch on a bug-window build are
covered end to end in fresh processes (``test_gemma4_root_cause.py``).
"""

from __future__ import annotations

import contextlib
import logging
import pickle
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from sglang_nvfp4_patches.gemma4_attention import rule_state
from sglang_nvfp4_patches.gemma4_attention.commands import current_state, install
from sglang_nvfp4_patches.gemma4_attention.rule import (
    Gemma4Decision,
    Gemma4Facts,
    Gemma4Mode,
    kv_cache_is_fp8,
)
from sglang_nvfp4_patches.nvfp4_moe_runner.suspension import suspended as other_question_suspended
from sglang_nvfp4_patches.server_args_seam import hooks
from sglang_nvfp4_patches.server_args_seam.seam import SeamKind, find_override_seam
from sglang_nvfp4_patches.simulation.gpus import GPU_PROFILES
from sglang_nvfp4_patches.simulation.server_args import resolve
from sglang_nvfp4_patches.supported_releases import sglang_version
from support.configs import (
    ALL_BUNDLED,
    GEMMA4_BF16_MOE,
    GEMMA4_NVFP4_DENSE,
    GEMMA4_NVFP4_MOE,
    REMOVE,
    edited_copy,
)
from support.gemma4_cases import resolved
from support.release import NO_CPU_KERNEL_RELEASES

pytestmark = pytest.mark.release_matrix

GPUS = sorted(GPU_PROFILES)
SM10X = {"sm100", "sm103"}
FLAGS = [
    {},
    {"attention_backend": "trtllm_mha"},
    {"attention_backend": "triton"},
    {"prefill_attention_backend": "trtllm_mha"},
    {"decode_attention_backend": "trtllm_mha"},
    {"prefill_attention_backend": "trtllm_mha", "decode_attention_backend": "triton"},
]


@pytest.fixture(params=["as loaded", "forced"])
def mode(request: pytest.FixtureRequest) -> Iterator[Gemma4Mode]:
    loaded = rule_state.current_mode()
    assert loaded is not None, "load_plugins() did not run the gemma4-attention installer"
    if request.param == "forced":
        install(forced=True, observe=False)
    try:
        yield rule_state.current_mode()
    finally:
        rule_state.set_mode(loaded)


def our_records(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("sglang_nvfp4_patches") and r.levelno == level
    ]


def test_patch_state_follows_the_root_cause() -> None:
    report = current_state()
    if rule_state.current_mode() is Gemma4Mode.FIXED:
        assert report.state.value == "already upstream", report
        assert "sglang#28144" in report.reason
    else:
        assert report.state.value == "applied", report
        assert "FP8 KV-cache path: dropped, recorded by CI for SGLang" in report.reason


@pytest.mark.parametrize("gpu", GPUS)
@pytest.mark.parametrize("model_dir", ALL_BUNDLED, ids=lambda p: p.name)
@pytest.mark.parametrize(
    "flags", FLAGS, ids=lambda f: ",".join(f"{k}={v}" for k, v in f.items()) or "no-flags"
)
def test_bundled_configs_on_every_gpu(
    mode: Gemma4Mode, model_dir: Path, gpu: str, flags: dict
) -> None:
    try:
        unpatched = resolved(model_dir, gpu, patched=False, **flags)
    except ValueError as rejected:  # e.g. trtllm_mha off SM100 on releases that validate it
        with pytest.raises(ValueError) as also_rejected:
            resolved(model_dir, gpu, **flags)
        assert str(also_rejected.value) == str(rejected)
        return
    patched = resolved(model_dir, gpu, **flags)
    attention_given = "attention_backend" in flags or len(flags) == 2
    acts = mode is not Gemma4Mode.FIXED and not attention_given
    if model_dir == GEMMA4_NVFP4_MOE and gpu in SM10X and acts:
        # The rule: exactly as if the user had typed --attention-backend triton.
        assert patched["attention_backend"] == "triton"
        assert patched == resolved(
            model_dir, gpu, patched=False, attention_backend="triton", **flags
        )
    else:
        assert patched == unpatched


@pytest.mark.parametrize("gpu", sorted(SM10X))
def test_unaffected_checkpoints_keep_sglangs_default_on_sm10x(mode: Gemma4Mode, gpu: str) -> None:
    for model_dir in (GEMMA4_BF16_MOE, GEMMA4_NVFP4_DENSE):
        assert resolved(model_dir, gpu) == resolved(model_dir, gpu, patched=False)


def test_nvfp4_runner_and_quantization_defaults_stay_as_sglang_sets_them(mode: Gemma4Mode) -> None:
    for gpu in sorted(SM10X):
        patched = resolved(GEMMA4_NVFP4_MOE, gpu)
        unpatched = resolved(GEMMA4_NVFP4_MOE, gpu, patched=False)
        assert patched["moe_runner_backend"] == unpatched["moe_runner_backend"]
        assert patched["quantization"] == unpatched["quantization"]


def test_log_lines_where_the_rule_acts_and_silence_where_it_does_not(
    mode: Gemma4Mode, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="sglang_nvfp4_patches"):
        resolved(GEMMA4_NVFP4_MOE, "sm100")
    info = our_records(caplog, logging.INFO)
    assert our_records(caplog, logging.WARNING) == []
    if mode is Gemma4Mode.FIXED:
        assert info == []
        return
    assert len(info) == 1, info
    assert str(GEMMA4_NVFP4_MOE) in info[0]
    assert "triton" in info[0] and "--attention-backend trtllm_mha" in info[0]


def test_explicit_trtllm_mha_is_honoured(
    mode: Gemma4Mode, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="sglang_nvfp4_patches"):
        result = resolved(GEMMA4_NVFP4_MOE, "sm100", attention_backend="trtllm_mha")
    assert result["attention_backend"] == "trtllm_mha"
    warnings = our_records(caplog, logging.WARNING)
    if mode is Gemma4Mode.FIXED:
        assert warnings == []  # the fixed trtllm_mha is nothing to warn about
    elif mode is Gemma4Mode.FORCED:
        assert len(warnings) == 1 and "SGLANG_NVFP4_PATCHES_FORCE" in warnings[0]
    else:
        assert len(warnings) == 1
        assert "drops the FP8 KV-cache scales" in warnings[0]
        assert "--attention-backend triton" in warnings[0]
        assert "--kv-cache-dtype bfloat16" in warnings[0]


@pytest.mark.parametrize(
    ("enable_moe_block", "rule_applies"),
    [(REMOVE, False), (False, False), (True, True)],
    ids=["missing", "false", "true"],
)
def test_enable_moe_block_variants_in_real_configs(
    mode: Gemma4Mode, tmp_path: Path, enable_moe_block: object, rule_applies: bool
) -> None:
    model_dir = edited_copy(GEMMA4_NVFP4_MOE, tmp_path / "cfg", enable_moe_block=enable_moe_block)
    if rule_applies and mode is not Gemma4Mode.FIXED:
        assert resolved(model_dir, "sm100")["attention_backend"] == "triton"
    else:
        assert resolved(model_dir, "sm100") == resolved(model_dir, "sm100", patched=False)


def backend_the_patch_sets(enable_moe_block: object) -> str | None:
    """Call the seam's hook on this release directly with a hand-built record."""
    model_config = SimpleNamespace(
        quantization="modelopt_fp4",
        hf_config=SimpleNamespace(
            architectures=["Gemma4ForCausalLM"],
            text_config=SimpleNamespace(enable_moe_block=enable_moe_block),
        ),
        _parse_quant_hf_config=lambda: {"quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8"},
    )
    record = SimpleNamespace(
        model_path="<test>",
        attention_backend=None,
        prefill_attention_backend=None,
        decode_attention_backend=None,
        kv_cache_dtype="auto",
        _model_config=model_config,
        _model_config_built_from=None,
        _resolved_overrides=[],
        get_model_config=lambda: model_config,
    )
    from sglang_nvfp4_patches.simulation.gpus import simulated_gpu

    # The hook serves every question; the record is built for this one, so the other patch's
    # question (it asks about every architecture) is suspended.
    with simulated_gpu(GPU_PROFILES["sm100"]), other_question_suspended():
        if find_override_seam().kind is not SeamKind.ADJUSTMENTS_METHOD:
            return hooks.registry_provider(record, model_config.hf_config).get("attention_backend")
        hooks.adjustments_hook(lambda server_args: None, record)
        return record.attention_backend


@pytest.mark.parametrize(
    ("enable_moe_block", "declares_triton"),
    [(None, False), (0, False), (1, True), ("true", True), ("", False)],
)
def test_patch_reads_enable_moe_block_with_bool(
    mode: Gemma4Mode, enable_moe_block: object, declares_triton: bool
) -> None:
    """None and non-bool values reach the patch only through hand-built configs (the HF
    config class normalises the file), so the installed hook is called directly here."""
    # Where the root cause is fixed the hook, if registered at all, declares nothing.
    expected = "triton" if declares_triton and mode is not Gemma4Mode.FIXED else None
    assert backend_the_patch_sets(enable_moe_block) == expected


def test_explain_resolution_matches_direct_resolution(mode: Gemma4Mode) -> None:
    """`explain` goes through the same SGLang resolution (no copy of the rules)."""
    direct = resolved(GEMMA4_NVFP4_MOE, "sm103")
    via_explain = resolve(GEMMA4_NVFP4_MOE, GPU_PROFILES["sm103"])
    assert via_explain.attention_backend == direct["attention_backend"]
    assert via_explain.moe_runner_backend == direct["moe_runner_backend"]
    expected = "trtllm_mha" if mode is Gemma4Mode.FIXED else "triton"
    assert direct["attention_backend"] == expected


def built_and_resolved(gpu: str, *, rule_sees_it: bool, **flags: str):
    """A ServerArgs record as a launcher builds it; ``rule_sees_it=False`` is a record resolved
    before SGLang loaded plugins (the rule suspended), as a pickled copy reaches the scheduler."""
    from sglang_nvfp4_patches.simulation.gpus import simulated_gpu
    from sglang_nvfp4_patches.simulation.server_args import resolved_server_args

    def build():
        with simulated_gpu(GPU_PROFILES[gpu]):
            return resolved_server_args(GEMMA4_NVFP4_MOE, **flags)

    if rule_sees_it:
        return pickle.loads(pickle.dumps(build()))
    with rule_state.suspended():
        return pickle.loads(pickle.dumps(build()))


def bypass_check(record: object, caplog: pytest.LogCaptureFixture) -> tuple[bool, list[str]]:
    """What the scheduler-side check says about ``record`` on a simulated SM100."""
    from sglang_nvfp4_patches.simulation.gpus import simulated_gpu

    caplog.clear()
    with (
        caplog.at_level(logging.WARNING, logger="sglang_nvfp4_patches"),
        simulated_gpu(GPU_PROFILES["sm100"]),
    ):
        warned = hooks.check_record(record)
    return warned, our_records(caplog, logging.WARNING)


def test_scheduler_warns_once_about_a_record_resolved_before_plugins(
    mode: Gemma4Mode, caplog: pytest.LogCaptureFixture
) -> None:
    """The scheduler process loads plugins before it builds its ``Scheduler``; a record the
    rule never saw gets one WARNING there, wherever the rule would have acted."""
    from sglang_nvfp4_patches.simulation.gpus import simulated_gpu

    bypassed = built_and_resolved("sm100", rule_sees_it=False)
    # 0.5.12.x/0.5.13.x default this config to triton themselves: nothing was bypassed there.
    sglang_own = resolved(GEMMA4_NVFP4_MOE, "sm100", patched=False)["attention_backend"]
    acts = mode is not Gemma4Mode.FIXED and sglang_own == "trtllm_mha"
    warned, warnings = bypass_check(bypassed, caplog)
    assert warned is acts and len(warnings) == int(acts)
    if acts:
        assert "resolved before SGLang loaded plugins" in warnings[0]
        assert "load_plugins()" in warnings[0] and "--attention-backend triton" in warnings[0]
    assert bypass_check(built_and_resolved("sm100", rule_sees_it=True), caplog) == (False, [])
    if mode is Gemma4Mode.FIXED:
        return  # nothing installed, nothing hooked
    # The hook sits on SGLang's real Scheduler.__init__ and runs first; the original then
    # fails on this CPU machine, which has no port configuration to give it.
    try:
        import sglang.srt.managers.scheduler as scheduler_module
    except ImportError as error:  # 0.5.12.post1 needs its own sgl_kernel build for this
        if sglang_version() not in NO_CPU_KERNEL_RELEASES:
            raise
        pytest.skip(f"SGLang {sglang_version()}'s scheduler does not import on CPU: {error}")
    scheduler_cls = scheduler_module.Scheduler
    assert any(
        getattr(cell.cell_contents, "__name__", "") == "scheduler_init_hook"
        for cell in scheduler_cls.__init__.__closure__ or ()
    )
    caplog.clear()
    with (
        caplog.at_level(logging.WARNING, logger="sglang_nvfp4_patches"),
        simulated_gpu(GPU_PROFILES["sm100"]),
        pytest.raises(Exception),  # noqa: B017
    ):
        scheduler_cls(bypassed, None)
    assert len(our_records(caplog, logging.WARNING)) == int(acts)


@pytest.fixture
def decisions(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Gemma4Facts, Gemma4Decision]]:
    """Every decision the installed rule takes during the test, with the facts it read (all
    layouts decide through ``rule_state.decide_and_log``)."""
    seen: list[tuple[Gemma4Facts, Gemma4Decision]] = []
    decide = rule_state.decide_and_log

    def recording(facts: Gemma4Facts, model_path: str) -> Gemma4Decision:
        decision = decide(facts, model_path)
        seen.append((facts, decision))
        return decision

    monkeypatch.setattr(rule_state, "decide_and_log", recording)
    return seen


@pytest.mark.parametrize("mode", ["forced"], indirect=True)
@pytest.mark.parametrize("gpu", ["sm90", "sm120"])
def test_forced_rule_leaves_sm90_and_sm120_to_sglang(
    mode: Gemma4Mode, gpu: str, decisions: list, caplog: pytest.LogCaptureFixture
) -> None:
    """Absolute, not patched == unpatched (SGLang itself picks triton off SM10X): the rule
    was asked, decided to leave SGLang alone, and said nothing."""
    sglang_own = resolved(GEMMA4_NVFP4_MOE, gpu, patched=False)
    assert decisions == []  # suspended: SGLang's answer without any rule
    with caplog.at_level(logging.INFO, logger="sglang_nvfp4_patches"):
        patched = resolved(GEMMA4_NVFP4_MOE, gpu)
    assert decisions, "the forced rule was never consulted"
    for facts, decision in decisions:
        assert facts.compute_capability_major is None  # SGLang's SM10X probe said no
        assert decision.attention_backend is None and decision.warning is None
        assert "not Gemma 4 NVFP4 MoE on SM10X" in decision.reason
    assert our_records(caplog, logging.INFO) == our_records(caplog, logging.WARNING) == []
    assert patched["attention_backend"] == sglang_own["attention_backend"]
    assert patched == sglang_own
    # and the same rule does act on SM10X, so the recording above is not vacuous
    decisions.clear()
    assert resolved(GEMMA4_NVFP4_MOE, "sm100")["attention_backend"] == "triton"
    assert [d.attention_backend for _, d in decisions] == ["triton"] * len(decisions)
    assert decisions


def fp8_family(kv_cache_dtype: str) -> bool:
    """Reference: a KV cache stored as 8-bit floats (plain or MX-scaled E4M3/E5M2)."""
    return "fp8" in kv_cache_dtype.lower()


@pytest.mark.parametrize("mode", ["forced"], indirect=True)
def test_every_fp8_kv_cache_dtype_of_this_sglang_counts_as_fp8(
    mode: Gemma4Mode, decisions: list
) -> None:
    """The choices are read from SGLang's own ``--kv-cache-dtype`` (0.5.20+ add ``mxfp8``),
    each is resolved by SGLang on SM100, and the rule must have read it as SGLang stores it."""
    import argparse

    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser(add_help=False)
    ServerArgs.add_cli_args(parser)  # the launcher's own parser, choices and all
    (choices,) = [a.choices for a in parser._actions if a.dest == "kv_cache_dtype"]
    explicit = [choice for choice in choices if choice != "auto"]
    assert any(map(fp8_family, explicit)) and not all(map(fp8_family, explicit))
    read_as: dict[str, object] = {}
    for choice in explicit:
        assert kv_cache_is_fp8(choice, None) is fp8_family(choice), choice
        decisions.clear()
        # SGLang may refuse a cache on this simulated GPU (0.5.23: nvfp4, 0.5.13: fp4_e2m1),
        # after the rule read it or before; what the rule read is checked either way.
        with contextlib.suppress(ValueError, RuntimeError):
            resolved(GEMMA4_NVFP4_MOE, "sm100", kv_cache_dtype=choice)
        if decisions:
            read_as[choice] = {facts.kv_cache_fp8 for facts, _ in decisions}
    assert {choice for choice in explicit if fp8_family(choice)} <= set(read_as)
    assert read_as == {choice: {fp8_family(choice)} for choice in read_as}
