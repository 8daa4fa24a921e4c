"""The plugin as SGLang loads it: entry point, idempotence, whitelist, disable, fail-safe.

Each case runs in a fresh process (SGLang loads plugins once per process), with no test
monkeypatching, and reads SGLang's own registries back. The processes are forked from one that
has imported the ``sglang`` package and loaded no plugin (``support/forkserver.py``): where every
fresh interpreter stands before it can load plugins.
"""

from __future__ import annotations

import json
from importlib.metadata import entry_points

import pytest

from sglang_nvfp4_patches.patches import PATCHES
from support import SCRIPTS
from support.forkserver import run_python
from support.sglang_cpu import needs_runner_module

PROBE = SCRIPTS / "plugin_state_probe.py"
GEMMA4_ARCHS = {
    "Gemma4ForConditionalGeneration",
    "Gemma4ForCausalLM",
    "Gemma4UnifiedForConditionalGeneration",
}


def probe(*args: str, **env: str) -> tuple[dict, str]:
    """The state after ``load_plugins()`` in a fresh process. ``gemma4-attention`` is forced
    unless ``env`` says otherwise, so its wiring is in place on every release (where its root
    cause is fixed, an unforced load installs nothing: see the first test)."""
    forced = {"SGLANG_NVFP4_PATCHES_FORCE": "gemma4-attention"}
    done = run_python([str(PROBE), *args], {**forced, **env}, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    state_lines = [line for line in done.stdout.splitlines() if line.startswith("STATE ")]
    assert len(state_lines) == 1, done.stdout[-2000:]
    return json.loads(state_lines[0][len("STATE ") :]), done.stderr


def our_log_lines(stderr: str, level: str) -> list[str]:
    return [
        line for line in stderr.splitlines() if line.startswith(f"{level}:sglang_nvfp4_patches")
    ]


def test_entry_point_is_installed_where_sglang_looks() -> None:
    found = {ep.name: ep.value for ep in entry_points(group="sglang.srt.plugins")}
    assert found.get("nvfp4_patches") == "sglang_nvfp4_patches.plugin:register"


@pytest.mark.release_matrix
def test_fresh_process_gets_every_hook_from_load_plugins() -> None:
    """Unforced: the Gemma 4 rule is wired only where its root cause is live."""
    from sglang_nvfp4_patches.gemma4_attention import rule_state as root_cause

    state, stderr = probe(SGLANG_NVFP4_PATCHES_FORCE="")
    live = root_cause.kv_scale_verdict().bug_live
    assert state["gemma4_provider_count"] == {arch: int(live) for arch in GEMMA4_ARCHS}
    assert state["gemma4_provider_last"] is live
    assert "Executed general plugin: nvfp4_patches" in stderr
    assert our_log_lines(stderr, "ERROR") == []
    if not state["runner_module"]:  # 0.5.14 and older: no CUTLASS runner, nothing to hook
        return
    assert state["modelopt_create_moe_runner_hooked"]
    if state["runner_prescale_upstream"]:
        assert state["runner_funcs_are_sglangs_own"]  # inert: SGLang's own objects
    else:
        assert_runner_wrapped(state)


def assert_runner_wrapped(state: dict) -> None:
    """The registry holds the plugin's wrappers around SGLang's own fused functions, and they
    refuse top-2 with the plugin's error before SGLang's function (or a kernel) is reached."""
    assert state["runner_funcs_patched"]
    assert state["runner_funcs_wrap_sglangs_own"]
    assert not state["runner_funcs_are_sglangs_own"]
    assert state["runner_funcs_refuse_top2_with"] == ["TopKNotOneError"]


@pytest.mark.release_matrix
@needs_runner_module()
def test_runner_is_wrapped_where_no_record_shows_sglangs_own_prescale() -> None:
    """With no record of this release's behaviour (as on a release nobody verified), the
    runner is not shown to pre-scale, whatever its code reads like: the patcher must then
    really wrap the registered functions."""
    state, stderr = probe("--no-llama4-record")
    assert not state["runner_prescale_upstream"]
    assert_runner_wrapped(state)
    # Without the record, a method whose code shows no rejection (0.5.15's compressed-tensors
    # scheme) cannot be told apart from one the reader does not see: one ERROR says so and
    # names verify; no other ERROR (a patch that could not be applied) is allowed.
    errors = our_log_lines(stderr, "ERROR")
    assert all("cannot tell whether" in line and "verify" in line for line in errors), errors


def test_loading_three_times_installs_once() -> None:
    state, stderr = probe("--load-times", "3", "--register-times", "3")
    assert state["gemma4_provider_count"] == {arch: 1 for arch in GEMMA4_ARCHS}
    assert our_log_lines(stderr, "ERROR") == []


@pytest.mark.parametrize(
    ("whitelist", "loaded"), [("nvfp4_patches", True), ("some_other_plugin", False)]
)
def test_sglang_plugins_whitelist(whitelist: str, loaded: bool) -> None:
    state, _ = probe(SGLANG_PLUGINS=whitelist)
    expected = 1 if loaded else 0
    assert state["gemma4_provider_count"] == {arch: expected for arch in GEMMA4_ARCHS}
    assert state["modelopt_create_moe_runner_hooked"] is loaded


def test_disable_gemma4_attention_only() -> None:
    state, _ = probe(SGLANG_NVFP4_PATCHES_DISABLE="gemma4-attention")
    assert state["gemma4_provider_count"] == {arch: 0 for arch in GEMMA4_ARCHS}
    assert state["modelopt_create_moe_runner_hooked"]


def test_disable_router_weight_leaves_sglangs_own_objects() -> None:
    state, _ = probe(SGLANG_NVFP4_PATCHES_DISABLE="llama4-router-weight")
    assert state["runner_funcs_are_sglangs_own"]
    assert not state["modelopt_create_moe_runner_hooked"]
    assert state["gemma4_provider_count"] == {arch: 1 for arch in GEMMA4_ARCHS}


def test_unknown_patch_name_is_an_error_and_nothing_is_patched() -> None:
    state, stderr = probe(SGLANG_NVFP4_PATCHES_DISABLE="gemma4-attention,llama4-router-wieght")
    errors = our_log_lines(stderr, "ERROR")
    assert len(errors) == 1 and "llama4-router-wieght" in errors[0]
    assert state["gemma4_provider_count"] == {arch: 0 for arch in GEMMA4_ARCHS}
    assert state["runner_funcs_are_sglangs_own"]
    assert not state["modelopt_create_moe_runner_hooked"]


def test_missing_seam_logs_one_error_and_leaves_sglang_untouched() -> None:
    state, stderr = probe(
        "--without", "sglang.srt.arg_groups.model_override_base:register_model_override"
    )
    errors = our_log_lines(stderr, "ERROR")
    declaring = {patch.name for patch in PATCHES if patch.declares}  # through the registry
    assert len(errors) == len(declaring)
    assert declaring == {name for name in declaring for e in errors if name in e}
    assert all("register_model_override" in error for error in errors)
    from sglang_nvfp4_patches.supported_releases import sglang_version

    assert all(sglang_version() in error for error in errors)
    assert state["gemma4_provider_count"] == {arch: 0 for arch in GEMMA4_ARCHS}
    assert state["modelopt_create_moe_runner_hooked"]  # the other patch still works
