"""Patch ``gemma4-attention``: SGLang's server-args defaulting of the Gemma 4 attention backend.

The rule is :mod:`sglang_nvfp4_patches.gemma4_attention_rule`; it follows its root cause,
which :mod:`.root_cause` reads off this SGLang's TRT-LLM MHA backend at plugin load:

* fixed (0.5.14+): nothing is installed; SGLang's faster ``trtllm_mha`` default stands.
* live (0.5.12.x, 0.5.13.x, nightlies with sglang#28144 reverted) or forced with
  ``SGLANG_NVFP4_PATCHES_FORCE=gemma4-attention``: the rule is wired into whichever layout
  holds the Gemma 4 default (probed in this order): the model-override registry (0.5.20+,
  :mod:`.registry_layout`), the ``arg_groups.overrides`` registry (0.5.15.post1-0.5.18, same
  module), ``ServerArgs._handle_model_specific_adjustments`` (0.5.12-0.5.14,
  :mod:`.method_layout`); and the scheduler checks records resolved before plugins
  loaded (:mod:`.launch_paths`).
"""

from __future__ import annotations

import importlib
from typing import Any

from sglang_nvfp4_patches.gemma4_attention_rule import ROOT_CAUSE_ISSUE, Gemma4Mode, fixed_note
from sglang_nvfp4_patches.server_args_gemma4_default import root_cause
from sglang_nvfp4_patches.server_args_gemma4_default.facts import (
    PATCH_NAME,
    current_mode,
    set_mode,
    suspended,
)
from sglang_nvfp4_patches.server_args_gemma4_default.method_layout import (
    ADJUSTMENTS_METHOD,
    SERVER_ARGS_MODULE,
    MethodLayout,
)
from sglang_nvfp4_patches.server_args_gemma4_default.registry_layout import (
    OVERRIDES_MODULE,
    RegistryLayout,
    overrides_module_provider,
    registry_provider,
)
from sglang_nvfp4_patches.status import (
    PatchReport,
    PatchState,
    PatchUnavailable,
    outside_supported_range,
)

__all__ = [
    "PATCH_NAME",
    "current_state",
    "install",
    "out_of_range_report",
    "root_cause_note",
    "suspended",
]


def _layout() -> Any:
    """Probe the installed SGLang for the layout that holds the Gemma 4 default."""
    try:
        base = importlib.import_module("sglang.srt.arg_groups.model_override_base")
    except ImportError:
        base = None
    if base is not None:  # 0.5.20+: the registry must be complete, no fallback
        for name in ("register_model_override", "_MODEL_OVERRIDE_FNS"):
            if not hasattr(base, name):
                raise PatchUnavailable(f"{base.__name__} has no {name}")
        importlib.import_module("sglang.srt.arg_groups.model_overrides")  # SGLang's first
        return RegistryLayout("model-override registry", base, registry_provider, False)
    try:
        overrides = importlib.import_module(OVERRIDES_MODULE)
    except ImportError:
        overrides = None
    if overrides is not None and hasattr(overrides, "_MODEL_OVERRIDE_FNS"):
        for name in ("register_model_override", "is_sm100_supported"):
            if not hasattr(overrides, name):
                raise PatchUnavailable(f"{OVERRIDES_MODULE} has no {name}")
        return RegistryLayout(
            "arg_groups.overrides registry", overrides, overrides_module_provider, True
        )
    server_args_module = importlib.import_module(SERVER_ARGS_MODULE)
    server_args_cls = getattr(server_args_module, "ServerArgs", None)
    if server_args_cls is not None and ADJUSTMENTS_METHOD in vars(server_args_cls):
        if not hasattr(server_args_module, "is_sm100_supported"):
            raise PatchUnavailable(f"{SERVER_ARGS_MODULE} has no is_sm100_supported")
        return MethodLayout(server_args_cls)
    raise PatchUnavailable(
        "found neither a model-override registry (sglang.srt.arg_groups.model_override_base "
        "or .overrides) nor ServerArgs._handle_model_specific_adjustments"
    )


def _already_upstream() -> PatchReport:
    verdict = root_cause.kv_scale_verdict()
    return PatchReport(
        PATCH_NAME, PatchState.ALREADY_UPSTREAM, f"{fixed_note()}: {verdict.evidence}"
    )


def install(forced: bool = False) -> PatchReport:
    """Wire the rule in where its root cause is live (or it is forced); idempotent."""
    mode = root_cause.mode_for(forced)
    set_mode(mode)
    if mode is Gemma4Mode.FIXED:
        return _already_upstream()
    layout = _layout()
    if not layout.installed():
        from sglang_nvfp4_patches.post_import import when_imported
        from sglang_nvfp4_patches.server_args_gemma4_default import launch_paths

        layout.install()
        when_imported(launch_paths.SCHEDULER_MODULE, launch_paths.hook_scheduler)
    return current_state()


def _rule_summary(mode: Gemma4Mode) -> str:
    verdict = root_cause.kv_scale_verdict()
    if mode is Gemma4Mode.FORCED:
        return (
            "forced by SGLANG_NVFP4_PATCHES_FORCE=gemma4-attention (here "
            f"{verdict.evidence}); NVFP4 MoE on SM10X defaults to triton unless an attention "
            "backend is given"
        )
    return (
        f"{root_cause.verdict_phrase(verdict)} ({ROOT_CAUSE_ISSUE}); NVFP4 MoE with an FP8 KV "
        "cache on SM10X defaults to triton unless an attention backend is given"
    )


def current_state() -> PatchReport:
    """What SGLang holds now (not what ``install`` believes it did)."""
    mode = current_mode()
    if mode is None or mode is Gemma4Mode.FIXED:
        if not root_cause.kv_scale_verdict().bug_live:
            return _already_upstream()
        return PatchReport(PATCH_NAME, PatchState.FAILED, "the rule was never installed")
    layout = _layout()
    if layout.installed():
        return PatchReport(
            PATCH_NAME, PatchState.APPLIED, f"{layout.where()}: {_rule_summary(mode)}"
        )
    return PatchReport(PATCH_NAME, PatchState.FAILED, f"not installed in the {layout.name}")


def root_cause_note() -> str:
    """One line for ``explain``: the root-cause verdict and what it means here."""
    verdict = root_cause.kv_scale_verdict()
    mode = current_mode()
    if mode is Gemma4Mode.FORCED:
        return (
            "SGLANG_NVFP4_PATCHES_FORCE=gemma4-attention applies the triton rule (the "
            f"root-cause probe says {verdict.handoff.value} here)"
        )
    if not verdict.bug_live:
        return fixed_note()
    return (
        f"{root_cause.verdict_phrase(verdict)} ({ROOT_CAUSE_ISSUE}); Gemma 4 NVFP4 MoE with an "
        "FP8 KV cache on SM10X gets triton unless a backend is given"
    )


def out_of_range_report() -> PatchReport:
    """Outside the supported range nothing is installed; say whether upstream has the fix."""
    if not root_cause.kv_scale_verdict().bug_live:
        return _already_upstream()
    return outside_supported_range(PATCH_NAME)
