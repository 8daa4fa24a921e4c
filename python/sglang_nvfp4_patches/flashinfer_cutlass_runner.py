"""Patch ``llama4-router-weight``: the FlashInfer CUTLASS MoE runner and the NVFP4 MoE methods.

Three places reject Llama 4's ``apply_router_weight_on_input=True`` on this path:

1. the runner's fused functions (``sglang/srt/layers/moe/moe_runner/flashinfer_cutlass.py``,
   registered in SGLang's fused-function registry ``FusedOpPool``) - fixed upstream in
   0.5.21 (``_prescale_router_weight_on_input``);
2. ``ModelOptNvFp4FusedMoEMethod.apply``'s CUTLASS branch (ModelOpt checkpoints);
3. ``CompressedTensorsW4A4Nvfp4MoE.apply_weights``'s CUTLASS branch (compressed-tensors
   checkpoints made with llm-compressor) - both still asserting in 0.5.23.

Each is probed and patched separately, when SGLang imports the module that holds it (see
:mod:`post_import`): registry entries are wrapped so the top-1 pre-scale
(:mod:`router_weight_prescale`) runs before SGLang's own function, and each method reads its
runner config through a flag-free view for its own check while its ``MoeRunner`` keeps the
real config, which is what the (patched or upstream) fused function honours. The runner's
pre-scale is therefore the one place the router weight is applied.
"""

from __future__ import annotations

import dataclasses
import functools
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
    GENERIC_PREQUANTIZED_REMEDY,
    as_float32_final_scales,
    prescale_router_weight_on_input,
    require_top1,
)
from sglang_nvfp4_patches.sglang_hooks import install_hook
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
STANDARD_DISPATCH, FLASHINFER_A2A = (
    ("none", "flashinfer_cutlass"),
    ("flashinfer", "flashinfer_cutlass"),
)
CUTLASS_FUSED_FUNC_KEYS: tuple[tuple[str, str], ...] = (STANDARD_DISPATCH, FLASHINFER_A2A)
UPSTREAM_PRESCALE = "_prescale_router_weight_on_input"
_REJECTION = re.compile(
    r"assert\s*\(?\s*not\s+(self\.)?moe_runner_config\.apply_router_weight_on_input"
)


@dataclasses.dataclass(frozen=True)
class MethodHalf:
    """A quantization method that asserts the flag away on its CUTLASS branch."""

    part: str  # key in the outcomes and doctor's reason
    label: str
    module: str
    cls: str
    checked_in: str  # the method whose source holds the assert

    @property
    def target(self) -> str:
        return f"{self.module}.{self.cls}.create_moe_runner"


MODELOPT = MethodHalf(
    "modelopt",
    "ModelOpt NVFP4",
    "sglang.srt.layers.quantization.modelopt_quant",
    "ModelOptNvFp4FusedMoEMethod",
    "apply",
)
COMPRESSED_TENSORS = MethodHalf(
    "compressed-tensors",
    "compressed-tensors NVFP4",
    "sglang.srt.layers.quantization.compressed_tensors.schemes.compressed_tensors_w4a4_nvfp4_moe",
    "CompressedTensorsW4A4Nvfp4MoE",
    "apply_weights",
)
METHOD_HALVES: tuple[MethodHalf, ...] = (MODELOPT, COMPRESSED_TENSORS)
MODELOPT_MODULE, MODELOPT_METHOD = MODELOPT.module, MODELOPT.cls

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


# ---------------------------------------------------------------- flag-free view


@functools.cache
def _flag_free_class(config_cls: type) -> type:
    """``config_cls`` with ``apply_router_weight_on_input`` pinned to ``False`` (a property:
    it wins over the shared instance dict; writes to it are ignored)."""
    return type(
        f"FlagFree{config_cls.__name__}",
        (config_cls,),
        {
            "__doc__": "A runner config seen without apply_router_weight_on_input.",
            "__module__": __name__,
            "apply_router_weight_on_input": property(lambda _: False, lambda _, __: None),
        },
    )


def without_router_weight_on_input(runner_config: Any) -> Any:
    """A view of ``runner_config`` that reads the flag as ``False``.

    It shares the config's attribute dict, so whatever ``FusedMoE`` writes into the config
    later (runner backend, routing method, local expert count) is seen at once; nothing is
    copied and nothing is cached at module level, so no layer is kept alive through it.
    """
    view = object.__new__(_flag_free_class(type(runner_config)))
    view.__dict__ = runner_config.__dict__
    return view


def _require_flag_free_views() -> None:
    """Probe, before patching, that this release's ``MoeRunnerConfig`` can be viewed so (a
    slotted or frozen config could not): a failure here leaves SGLang untouched."""
    config_cls = getattr(importlib.import_module(REGISTRY_MODULE), "MoeRunnerConfig", None)
    try:
        config = config_cls(apply_router_weight_on_input=True)  # type: ignore[misc]
        view = without_router_weight_on_input(config)
        config.top_k = 1
        works = not view.apply_router_weight_on_input and view.top_k == 1
    except Exception as error:
        raise PatchUnavailable(f"cannot view {REGISTRY_MODULE}.MoeRunnerConfig: {error}") from error
    if not works:
        raise PatchUnavailable(f"{REGISTRY_MODULE}.MoeRunnerConfig views do not share state")


# ---------------------------------------------------------------- runner fused functions


def prequantized_remedies() -> dict[tuple[str, str], str]:
    """Per dispatch path, the switch that stops activations arriving quantized, as this
    release spells it (the field / variable is looked up, not assumed)."""
    from sglang.srt.server_args import ServerArgs

    remedies = dict.fromkeys(CUTLASS_FUSED_FUNC_KEYS, GENERIC_PREQUANTIZED_REMEDY)
    field = "disable_flashinfer_cutlass_moe_fp4_allgather"
    if hasattr(ServerArgs, field):  # a dataclass field, or a msgspec one (0.5.20+)
        remedies[STANDARD_DISPATCH] = (
            "They were quantized by the FP4 all-gather, which SGLang turns on by default for "
            "this runner with DP attention, EP size equal to DP size and --quantization "
            f"modelopt_fp4; turn it off with --{field.replace('_', '-')}."
        )
    try:
        from sglang.srt.environ import envs

        has_dispatch_env = hasattr(envs, "SGLANG_MOE_NVFP4_DISPATCH")
    except ImportError:
        has_dispatch_env = False
    if has_dispatch_env:
        remedies[FLASHINFER_A2A] = (
            "They were quantized by the FlashInfer all-to-all's NVFP4 dispatch "
            "(SGLANG_MOE_NVFP4_DISPATCH=1, which SGLang sets by default for --moe-a2a-backend "
            "flashinfer with NVFP4 MoE); turn it off with SGLANG_MOE_NVFP4_DISPATCH=0."
        )
    return remedies


def honour_router_weight_on_input(
    original: FusedFunc, prequantized_remedy: str = GENERIC_PREQUANTIZED_REMEDY
) -> FusedFunc:
    """Wrap one of SGLang's CUTLASS fused functions with the top-1 pre-scale."""

    def fused_func(dispatch_output: Any, quant_info: Any, runner_config: Any) -> Any:
        topk_output = dispatch_output.topk_output
        if runner_config.apply_router_weight_on_input:
            hidden_states, unit_scales = prescale_router_weight_on_input(
                dispatch_output.hidden_states,
                topk_output.topk_weights,
                getattr(dispatch_output, "hidden_states_scale", None),
                prequantized_remedy,
            )
            dispatch_output = dispatch_output._replace(
                hidden_states=hidden_states,
                topk_output=topk_output._replace(topk_weights=unit_scales),
            )
            runner_config = without_router_weight_on_input(runner_config)
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
        _require_flag_free_views()
    except PatchUnavailable as error:
        _record("runner", PatchState.FAILED, str(error))
        return
    remedies = prequantized_remedies()
    for key in CUTLASS_FUSED_FUNC_KEYS:
        if not is_patched(registry[key]):
            registry[key] = honour_router_weight_on_input(registry[key], remedies[key])
    _record(
        "runner",
        PatchState.APPLIED,
        "FlashInfer CUTLASS fused functions pre-scale top-1 router weights on the input",
    )


# ---------------------------------------------------------------- NVFP4 MoE methods


def _runs_on_cutlass(method: Any) -> bool:
    backend = getattr(getattr(method, "runner", None), "runner_backend", None)
    is_cutlass = getattr(backend, "is_flashinfer_cutlass", None)
    if callable(is_cutlass):
        return bool(is_cutlass())
    return bool(getattr(method, "enable_flashinfer_cutlass_moe", False))


def _create_moe_runner_hook(
    original: Callable[..., Any], method: Any, *args: Any, **kwargs: Any
) -> Any:
    """After SGLang builds the runner, hand the method a flag-free view for its own check.

    The ``MoeRunner`` keeps the real config, so the fused function still sees the flag and
    applies the router weight; only the method's blanket rejection stops seeing it. Top-k > 1
    cannot be honoured on this runner, so it is refused here, where the layer is built.
    """
    result = original(method, *args, **kwargs)
    config = getattr(method, "moe_runner_config", None)
    if config is not None and config.apply_router_weight_on_input and _runs_on_cutlass(method):
        require_top1(getattr(config, "top_k", None))
        method.moe_runner_config = without_router_weight_on_input(config)
    return result


def rejects_router_weight_on_input(half: MethodHalf, method_cls: type) -> bool:
    """Whether ``half``'s method still asserts the flag away (read from its source)."""
    try:
        source = inspect.getsource(getattr(method_cls, half.checked_in))
    except (AttributeError, OSError, TypeError) as error:
        raise PatchUnavailable(
            f"cannot read {half.cls}.{half.checked_in} source ({error})"
        ) from error
    return _REJECTION.search(source) is not None


def _method_patcher(half: MethodHalf) -> Callable[[ModuleType], None]:
    def patch_module(module: ModuleType) -> None:
        method_cls = getattr(module, half.cls, None)
        try:
            if method_cls is None or not hasattr(method_cls, "create_moe_runner"):
                raise PatchUnavailable(f"{half.target} not found")
            rejects = rejects_router_weight_on_input(half, method_cls)
            if rejects:
                _require_flag_free_views()
        except PatchUnavailable as error:
            _record(half.part, PatchState.FAILED, str(error))
            return
        if not rejects:
            _record(
                half.part,
                PatchState.ALREADY_UPSTREAM,
                f"{half.cls}.{half.checked_in} does not reject apply_router_weight_on_input",
            )
            return
        if not is_patched(method_cls.__dict__.get("create_moe_runner")):
            hooked = install_hook(half.target, _create_moe_runner_hook)
            setattr(hooked, PATCHED_MARK, True)
        _record(
            half.part,
            PatchState.APPLIED,
            f"{half.cls} no longer rejects apply_router_weight_on_input on the CUTLASS runner",
        )

    patch_module.__qualname__ = f"patch_{half.part.replace('-', '_')}_module"
    return _reported_as(half.part)(patch_module)


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


def _not_applicable() -> PatchReport:
    return PatchReport(
        PATCH_NAME,
        PatchState.NOT_APPLICABLE,
        f"this SGLang has no FlashInfer CUTLASS MoE runner module ({RUNNER_MODULE})",
    )


def install() -> PatchReport:
    """Arrange for every half to be patched when SGLang imports its module."""
    from sglang_nvfp4_patches import ray_actors
    from sglang_nvfp4_patches.post_import import when_imported

    if not _module_exists(RUNNER_MODULE):
        return _not_applicable()
    when_imported(RUNNER_MODULE, _patch_runner_module)
    for half in METHOD_HALVES:
        when_imported(half.module, _method_patcher(half))
    ray_actors.install()
    return summarize()


NO_REJECTION = "none in this release"


def _method_note(half: MethodHalf) -> tuple[str, str | None]:
    """Doctor's note on one method half, and the problem if its rejection is still live."""
    method_cls = getattr(importlib.import_module(half.module), half.cls)
    if not rejects_router_weight_on_input(half, method_cls):
        return f"{half.label} rejection: {NO_REJECTION}", None
    if is_patched(method_cls.__dict__.get("create_moe_runner")):
        return f"{half.label} rejection: lifted", None
    problem = f"{half.cls}.{half.checked_in} still rejects apply_router_weight_on_input"
    return f"{half.label} rejection: not lifted", problem


def current_state() -> PatchReport:
    """What the installed SGLang holds now: imports the modules and looks at the objects."""
    from sglang_nvfp4_patches import ray_actors

    if not _module_exists(RUNNER_MODULE):
        return _not_applicable()
    try:
        runner = importlib.import_module(RUNNER_MODULE)
        registry = _fused_func_registry()
        method_notes = [_method_note(half) for half in METHOD_HALVES]
    except (ImportError, AttributeError, PatchUnavailable) as error:
        return PatchReport(PATCH_NAME, PatchState.FAILED, f"cannot inspect: {error}")
    runner_upstream = hasattr(runner, UPSTREAM_PRESCALE)
    runner_patched = all(is_patched(registry.get(key)) for key in CUTLASS_FUSED_FUNC_KEYS)
    problems = [problem for _, problem in method_notes if problem]
    if not (runner_upstream or runner_patched):
        problems.insert(0, "CUTLASS fused functions still reject apply_router_weight_on_input")
    if problems:
        return PatchReport(PATCH_NAME, PatchState.FAILED, "; ".join(problems))
    notes = ["runner pre-scale: " + ("upstream" if runner_upstream else "patched")]
    notes += [note for note, _ in method_notes]
    nothing_to_patch = runner_upstream and all(n.endswith(NO_REJECTION) for n in notes[1:])
    ray_note = ray_actors.doctor_note()
    if ray_note:
        notes.append(ray_note)
    state = PatchState.ALREADY_UPSTREAM if nothing_to_patch else PatchState.APPLIED
    return PatchReport(PATCH_NAME, state, "; ".join(notes))


def out_of_range_report() -> PatchReport:
    return outside_supported_range(PATCH_NAME)


def summarize() -> PatchReport:
    """One report from the halves (``applied`` if any had to be patched)."""
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
    if states == {PatchState.ALREADY_UPSTREAM} and len(parts) == 1 + len(METHOD_HALVES):
        return PatchReport(PATCH_NAME, PatchState.ALREADY_UPSTREAM, reason)
    return PatchReport(PATCH_NAME, PatchState.APPLIED, reason)
