"""Patch ``llama4-router-weight``: the FlashInfer CUTLASS MoE runner and ModelOpt NVFP4 MoE.

Two places reject Llama 4's ``apply_router_weight_on_input=True`` on this path:

1. the runner's fused functions (``sglang/srt/layers/moe/moe_runner/flashinfer_cutlass.py``,
   registered in SGLang's fused-function registry ``FusedOpPool``) - fixed upstream in
   0.5.22 (``_prescale_router_weight_on_input``);
2. ``ModelOptNvFp4FusedMoEMethod.apply``'s CUTLASS branch - still asserting in 0.5.23.

Each is probed and patched separately, when SGLang imports the module that holds it (see
:mod:`post_import`): registry entries are wrapped so the top-1 pre-scale
(:mod:`router_weight_prescale`) runs before SGLang's own function, and the ModelOpt method
keeps a flag-free copy of its runner config for its own check while its ``MoeRunner`` keeps
the real one, which is what the (patched) fused function honours.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import logging
import re
import threading
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from sglang_nvfp4_patches.router_weight_prescale import (
    as_float32_final_scales,
    prescale_router_weight_on_input,
)
from sglang_nvfp4_patches.status import (
    PATCHED_MARK,
    PatchReport,
    PatchState,
    PatchUnavailable,
    outside_supported_range,
    sglang_version,
)

PATCH_NAME = "llama4-router-weight"
logger = logging.getLogger("sglang_nvfp4_patches.llama4_router_weight")

RUNNER_MODULE = "sglang.srt.layers.moe.moe_runner.flashinfer_cutlass"
REGISTRY_MODULE = "sglang.srt.layers.moe.moe_runner.base"
MODELOPT_MODULE = "sglang.srt.layers.quantization.modelopt_quant"
MODELOPT_METHOD = "ModelOptNvFp4FusedMoEMethod"
CUTLASS_FUSED_FUNC_KEYS: tuple[tuple[str, str], ...] = (
    ("none", "flashinfer_cutlass"),
    ("flashinfer", "flashinfer_cutlass"),
)
UPSTREAM_PRESCALE = "_prescale_router_weight_on_input"
_MODELOPT_REJECTION = re.compile(
    r"assert\s*\(?\s*not\s+(self\.)?moe_runner_config\.apply_router_weight_on_input"
)

FusedFunc = Callable[[Any, Any, Any], Any]

# What each half did, for ``doctor`` and the ERROR log; filled by the import callbacks.
_lock = threading.Lock()
_outcomes: dict[str, PatchReport] = {}


def _record(part: str, state: PatchState, reason: str) -> None:
    with _lock:
        _outcomes[part] = PatchReport(PATCH_NAME, state, reason)
    if state is PatchState.FAILED:
        logger.error(
            "[%s] could not patch %s on SGLang %s: %s. SGLang is left unchanged there.",
            PATCH_NAME,
            part,
            sglang_version(),
            reason,
        )


def _reported_as(
    part: str,
) -> Callable[[Callable[[ModuleType], None]], Callable[[ModuleType], None]]:
    """Any unexpected error while patching ``part`` becomes its one ERROR line and a
    ``failed`` state; the module stays as SGLang made it."""

    def decorate(patch_module: Callable[[ModuleType], None]) -> Callable[[ModuleType], None]:
        def guarded(module: ModuleType) -> None:
            try:
                patch_module(module)
            except Exception as error:
                _record(part, PatchState.FAILED, f"{type(error).__name__}: {error}")

        guarded.__qualname__ = patch_module.__qualname__
        return guarded

    return decorate


# ---------------------------------------------------------------- runner fused functions


_flag_free_configs: dict[int, tuple[Any, Any]] = {}


def _without_router_weight_on_input(runner_config: Any) -> Any:
    """The same config with the flag cleared (cached: one per MoE layer, not one per call)."""
    cached = _flag_free_configs.get(id(runner_config))
    if cached is not None and cached[0] is runner_config:
        return cached[1]
    flag_free = dataclasses.replace(runner_config, apply_router_weight_on_input=False)
    _flag_free_configs[id(runner_config)] = (runner_config, flag_free)
    return flag_free


def honour_router_weight_on_input(original: FusedFunc) -> FusedFunc:
    """Wrap one of SGLang's CUTLASS fused functions with the top-1 pre-scale."""

    def fused_func(dispatch_output: Any, quant_info: Any, runner_config: Any) -> Any:
        topk_output = dispatch_output.topk_output
        if runner_config.apply_router_weight_on_input:
            hidden_states, unit_scales = prescale_router_weight_on_input(
                dispatch_output.hidden_states,
                topk_output.topk_weights,
                getattr(dispatch_output, "hidden_states_scale", None),
            )
            dispatch_output = dispatch_output._replace(
                hidden_states=hidden_states,
                topk_output=topk_output._replace(topk_weights=unit_scales),
            )
            runner_config = _without_router_weight_on_input(runner_config)
        else:
            weights = as_float32_final_scales(topk_output.topk_weights)
            if weights is not topk_output.topk_weights:
                dispatch_output = dispatch_output._replace(
                    topk_output=topk_output._replace(topk_weights=weights)
                )
        return original(dispatch_output, quant_info, runner_config)

    fused_func.__name__ = getattr(original, "__name__", "fused_func")
    fused_func.__qualname__ = getattr(original, "__qualname__", fused_func.__name__)
    fused_func.__doc__ = original.__doc__
    fused_func.__wrapped__ = original  # type: ignore[attr-defined]
    setattr(fused_func, PATCHED_MARK, True)
    return fused_func


def is_patched(obj: Any) -> bool:
    return bool(getattr(obj, PATCHED_MARK, False))


def _fused_func_registry() -> dict[tuple[str, str], FusedFunc]:
    base = importlib.import_module(REGISTRY_MODULE)
    pool = getattr(base, "FusedOpPool", None)
    funcs = getattr(pool, "_fused_funcs", None)
    if not isinstance(funcs, dict):
        raise PatchUnavailable(f"{REGISTRY_MODULE}.FusedOpPool._fused_funcs is not a dict")
    return funcs


@_reported_as("runner")
def _patch_runner_module(module: ModuleType) -> None:
    if hasattr(module, UPSTREAM_PRESCALE):
        _record(
            "runner",
            PatchState.ALREADY_UPSTREAM,
            f"{RUNNER_MODULE}.{UPSTREAM_PRESCALE} exists: the runner pre-scales top-1 itself",
        )
        return
    try:
        registry = _fused_func_registry()
        missing = [key for key in CUTLASS_FUSED_FUNC_KEYS if key not in registry]
        if missing:
            raise PatchUnavailable(f"fused-function registry has no entry for {missing}")
    except PatchUnavailable as error:
        _record("runner", PatchState.FAILED, str(error))
        return
    for key in CUTLASS_FUSED_FUNC_KEYS:
        if not is_patched(registry[key]):
            registry[key] = honour_router_weight_on_input(registry[key])
    _record(
        "runner",
        PatchState.APPLIED,
        "FlashInfer CUTLASS fused functions pre-scale top-1 router weights on the input",
    )


# ---------------------------------------------------------------- ModelOpt NVFP4 MoE method


def _runs_on_cutlass(method: Any) -> bool:
    backend = getattr(getattr(method, "runner", None), "runner_backend", None)
    is_cutlass = getattr(backend, "is_flashinfer_cutlass", None)
    if callable(is_cutlass):
        return bool(is_cutlass())
    return bool(getattr(method, "enable_flashinfer_cutlass_moe", False))


def _create_moe_runner_hook(
    original: Callable[..., Any], method: Any, *args: Any, **kwargs: Any
) -> Any:
    """After SGLang builds the runner, hand the method a flag-free config for its own check.

    The ``MoeRunner`` keeps the real config, so the fused function still sees the flag and
    applies the router weight; only the method's blanket rejection stops seeing it.
    """
    result = original(method, *args, **kwargs)
    config = getattr(method, "moe_runner_config", None)
    if config is not None and config.apply_router_weight_on_input and _runs_on_cutlass(method):
        method.moe_runner_config = _without_router_weight_on_input(config)
    return result


def modelopt_rejects_router_weight_on_input(method_cls: type) -> bool:
    """Whether the ModelOpt NVFP4 MoE ``apply`` still asserts the flag away."""
    try:
        source = inspect.getsource(method_cls.apply)
    except (OSError, TypeError) as error:
        raise PatchUnavailable(f"cannot read {MODELOPT_METHOD}.apply source ({error})") from error
    return _MODELOPT_REJECTION.search(source) is not None


@_reported_as("modelopt")
def _patch_modelopt_module(module: ModuleType) -> None:
    method_cls = getattr(module, MODELOPT_METHOD, None)
    try:
        if method_cls is None or not hasattr(method_cls, "create_moe_runner"):
            raise PatchUnavailable(
                f"{MODELOPT_MODULE}.{MODELOPT_METHOD}.create_moe_runner not found"
            )
        rejects = modelopt_rejects_router_weight_on_input(method_cls)
    except PatchUnavailable as error:
        _record("modelopt", PatchState.FAILED, str(error))
        return
    if not rejects:
        _record(
            "modelopt",
            PatchState.ALREADY_UPSTREAM,
            f"{MODELOPT_METHOD}.apply no longer rejects apply_router_weight_on_input",
        )
        return
    if not is_patched(method_cls.__dict__.get("create_moe_runner")):
        from sglang.srt.plugins.hook_registry import HookRegistry, HookType

        target = f"{MODELOPT_MODULE}.{MODELOPT_METHOD}.create_moe_runner"
        HookRegistry.register(target, _create_moe_runner_hook, HookType.AROUND)
        HookRegistry.apply_hooks()
        hooked = method_cls.__dict__["create_moe_runner"]
        if getattr(hooked, "__wrapped__", None) is None:  # HookRegistry logged why
            raise PatchUnavailable(f"SGLang's HookRegistry did not wrap {target}")
        setattr(hooked, PATCHED_MARK, True)
    _record(
        "modelopt",
        PatchState.APPLIED,
        f"{MODELOPT_METHOD} no longer rejects apply_router_weight_on_input on the CUTLASS runner",
    )


# ---------------------------------------------------------------- install / inspect


def _module_exists(name: str) -> bool:
    """Look for the module's file without importing its parent packages (seconds of torch
    and kernel imports in a launcher that never builds a MoE layer)."""
    import sglang

    relative = Path(*name.split(".")[1:])
    return any(
        (Path(root) / relative).with_suffix(".py").is_file() or (Path(root) / relative).is_dir()
        for root in sglang.__path__
    )


def install() -> PatchReport:
    """Arrange for both halves to be patched when SGLang imports their modules."""
    from sglang_nvfp4_patches.post_import import when_imported

    if not _module_exists(RUNNER_MODULE):
        return PatchReport(
            PATCH_NAME,
            PatchState.NOT_APPLICABLE,
            f"this SGLang has no FlashInfer CUTLASS MoE runner module ({RUNNER_MODULE})",
        )
    when_imported(RUNNER_MODULE, _patch_runner_module)
    when_imported(MODELOPT_MODULE, _patch_modelopt_module)
    return summarize()


def current_state() -> PatchReport:
    """What the installed SGLang holds now: imports both modules and looks at the objects."""
    if not _module_exists(RUNNER_MODULE):
        return PatchReport(
            PATCH_NAME,
            PatchState.NOT_APPLICABLE,
            f"this SGLang has no FlashInfer CUTLASS MoE runner module ({RUNNER_MODULE})",
        )
    try:
        runner = importlib.import_module(RUNNER_MODULE)
        modelopt = importlib.import_module(MODELOPT_MODULE)
        registry = _fused_func_registry()
        method_cls = getattr(modelopt, MODELOPT_METHOD)
        modelopt_rejects = modelopt_rejects_router_weight_on_input(method_cls)
    except (ImportError, AttributeError, PatchUnavailable) as error:
        return PatchReport(PATCH_NAME, PatchState.FAILED, f"cannot inspect: {error}")
    runner_upstream = hasattr(runner, UPSTREAM_PRESCALE)
    runner_patched = all(is_patched(registry.get(key)) for key in CUTLASS_FUSED_FUNC_KEYS)
    modelopt_patched = is_patched(method_cls.__dict__.get("create_moe_runner"))
    if runner_upstream and not modelopt_rejects:
        return PatchReport(
            PATCH_NAME,
            PatchState.ALREADY_UPSTREAM,
            "runner pre-scales top-1 router weights and ModelOpt NVFP4 accepts the flag",
        )
    problems = []
    if not (runner_upstream or runner_patched):
        problems.append("CUTLASS fused functions still reject apply_router_weight_on_input")
    if modelopt_rejects and not modelopt_patched:
        problems.append(f"{MODELOPT_METHOD}.apply still rejects apply_router_weight_on_input")
    if problems:
        return PatchReport(PATCH_NAME, PatchState.FAILED, "; ".join(problems))
    runner_note = "runner pre-scale: " + ("upstream" if runner_upstream else "patched")
    modelopt_note = "ModelOpt NVFP4 rejection: " + (
        "lifted" if modelopt_rejects else "upstream fix"
    )
    return PatchReport(PATCH_NAME, PatchState.APPLIED, f"{runner_note}; {modelopt_note}")


def out_of_range_report() -> PatchReport:
    return outside_supported_range(PATCH_NAME)


def summarize() -> PatchReport:
    """One report from the two halves (``applied`` if either had to be patched)."""
    with _lock:
        parts = dict(_outcomes)
    if not parts:
        return PatchReport(
            PATCH_NAME, PatchState.APPLIED, "pending: patched when SGLang loads a MoE layer"
        )
    failed = [
        f"{part}: {report.reason}"
        for part, report in parts.items()
        if report.state is PatchState.FAILED
    ]
    if failed:
        return PatchReport(PATCH_NAME, PatchState.FAILED, "; ".join(failed))
    states = {report.state for report in parts.values()}
    reason = "; ".join(report.reason for report in parts.values())
    if states == {PatchState.ALREADY_UPSTREAM} and len(parts) == 2:
        return PatchReport(PATCH_NAME, PatchState.ALREADY_UPSTREAM, reason)
    return PatchReport(PATCH_NAME, PatchState.APPLIED, reason)
