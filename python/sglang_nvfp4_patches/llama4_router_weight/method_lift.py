"""Seam 2: the NVFP4 MoE methods that reject the flag on their CUTLASS branch.

``ModelOptNvFp4FusedMoEMethod.apply`` (ModelOpt checkpoints) and
``CompressedTensorsW4A4Nvfp4MoE.apply_weights`` (llm-compressor checkpoints) still assert
``not apply_router_weight_on_input`` in 0.5.23. Whether a release still rejects it is read
from what the method's code does, in any spelling (:mod:`.rejection_reader`): lifted where it
rejects, upstream only where the code shows it no longer does, ``unknown`` (left as SGLang
ships it) where the reader cannot tell. An AROUND hook on each method's
``create_moe_runner`` lets SGLang build the runner with the real config, then decides for
this layer (:mod:`.rule`): refuse it now, naming the switch, or hand the method a flag-free
view for its own check while the ``MoeRunner`` keeps the real config, which the runner's
pre-scale honours.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from types import ModuleType
from typing import Any

from sglang_nvfp4_patches.llama4_router_weight import outcomes
from sglang_nvfp4_patches.llama4_router_weight.flag_free_view import (
    without_router_weight_on_input,
)
from sglang_nvfp4_patches.llama4_router_weight.layer_facts import layer_facts
from sglang_nvfp4_patches.llama4_router_weight.rejection_reader import Reading, read_method
from sglang_nvfp4_patches.llama4_router_weight.rule import refusal_for
from sglang_nvfp4_patches.llama4_router_weight.runner_registry import (
    require_flag_free_views,
    runner_backends,
    runner_problem,
)
from sglang_nvfp4_patches.llama4_router_weight.suspension import is_suspended
from sglang_nvfp4_patches.sglang_hooks import bound_at, hook_count, install_hook
from sglang_nvfp4_patches.status import PatchState, PatchUnavailable


@dataclasses.dataclass(frozen=True)
class RejectingMethod:
    """One NVFP4 MoE quantization method (a whole class, not a part of one) that asserts the
    flag away on its CUTLASS branch."""

    part: str  # key in the outcomes and doctor's reason
    label: str
    module: str
    cls: str
    checked_in: str  # the method whose source holds the assert

    @property
    def target(self) -> str:
        return f"{self.module}.{self.cls}.create_moe_runner"


MODELOPT = RejectingMethod(
    "modelopt",
    "ModelOpt NVFP4",
    "sglang.srt.layers.quantization.modelopt_quant",
    "ModelOptNvFp4FusedMoEMethod",
    "apply",
)
COMPRESSED_TENSORS = RejectingMethod(
    "compressed-tensors",
    "compressed-tensors NVFP4",
    "sglang.srt.layers.quantization.compressed_tensors.schemes.compressed_tensors_w4a4_nvfp4_moe",
    "CompressedTensorsW4A4Nvfp4MoE",
    "apply_weights",
)
REJECTING_METHODS: tuple[RejectingMethod, ...] = (MODELOPT, COMPRESSED_TENSORS)


def runs_on_cutlass(method: Any) -> bool:
    backend = getattr(getattr(method, "runner", None), "runner_backend", None)
    is_cutlass = getattr(backend, "is_flashinfer_cutlass", None)
    if callable(is_cutlass):
        return bool(is_cutlass())
    return bool(getattr(method, "enable_flashinfer_cutlass_moe", False))


def rejecting_method_of(method: Any) -> RejectingMethod | None:
    """The rejecting method ``method`` is an instance of (a subclass counts)."""
    names = {cls.__name__ for cls in type(method).__mro__}
    return next((rejecting for rejecting in REJECTING_METHODS if rejecting.cls in names), None)


NOT_HONOURED = (
    "not lifted: the FlashInfer CUTLASS runner does not honour apply_router_weight_on_input "
    "here ({problem}); lifting the method's check would weight the expert output instead of "
    "the input, so SGLang's own check stays"
)


def create_moe_runner_hook(
    original: Callable[..., Any], method: Any, *args: Any, **kwargs: Any
) -> Any:
    """After SGLang builds the runner: refuse this layer, or lift the method's own check
    (only where the runner honours the flag: otherwise SGLang's check stays)."""
    result = original(method, *args, **kwargs)
    if is_suspended():
        return result
    config = getattr(method, "moe_runner_config", None)
    if config is not None and config.apply_router_weight_on_input and runs_on_cutlass(method):
        layer = args[0] if args else kwargs.get("layer")
        refusal = refusal_for(layer_facts(layer, method, config))
        if refusal is not None:
            raise refusal
        problem = runner_problem()
        if problem is not None:
            rejecting = rejecting_method_of(method)
            part = rejecting.part if rejecting is not None else type(method).__name__
            outcomes.record(part, PatchState.FAILED, NOT_HONOURED.format(problem=problem))
            return result
        method.moe_runner_config = without_router_weight_on_input(config)
    return result


@functools.cache
def reading_of(rejecting: RejectingMethod, method_cls: type) -> Reading:
    """What ``rejecting``'s method does with the flag on the CUTLASS runner, read from its code."""
    return read_method(method_cls, rejecting.checked_in, runner_backends())


def cannot_tell(rejecting: RejectingMethod, reading: Reading) -> str:
    return (
        f"cannot tell whether {rejecting.cls}.{rejecting.checked_in} still rejects "
        f"apply_router_weight_on_input: it {reading.summary()}; left as SGLang ships it"
    )


def still_rejects(rejecting: RejectingMethod) -> str:
    return f"{rejecting.cls}.{rejecting.checked_in} still rejects apply_router_weight_on_input"


def upstream_reason(rejecting: RejectingMethod, reading: Reading) -> str:
    how = "reads it nowhere" if not reading.found else f"uses it ({reading.summary()})"
    return (
        f"{rejecting.cls}.{rejecting.checked_in} does not reject apply_router_weight_on_input: "
        f"on the CUTLASS runner it {how}"
    )


def is_lifted(rejecting: RejectingMethod) -> bool:
    return hook_count(bound_at(rejecting.target), create_moe_runner_hook) == 1


def method_patcher(rejecting: RejectingMethod, apply: bool = True) -> Callable[[ModuleType], None]:
    """Import callback for ``rejecting``'s module: hook it where its rejection is still live;
    with ``apply=False`` only record whether it is."""

    def patch_module(module: ModuleType) -> None:
        method_cls = getattr(module, rejecting.cls, None)
        try:
            if method_cls is None or not hasattr(method_cls, "create_moe_runner"):
                raise PatchUnavailable(f"{rejecting.target} not found")
            reading = reading_of(rejecting, method_cls)
            if reading.rejects:
                require_flag_free_views()
        except PatchUnavailable as error:
            outcomes.record(rejecting.part, PatchState.FAILED, str(error))
            return
        if reading.upstream:
            outcomes.record(
                rejecting.part, PatchState.ALREADY_UPSTREAM, upstream_reason(rejecting, reading)
            )
            return
        if not reading.rejects:
            outcomes.record(rejecting.part, PatchState.UNKNOWN, cannot_tell(rejecting, reading))
            return
        if not apply:
            outcomes.record(rejecting.part, PatchState.NOT_PATCHED, still_rejects(rejecting))
            return
        install_hook(rejecting.target, create_moe_runner_hook)
        outcomes.record(
            rejecting.part,
            PatchState.APPLIED,
            f"{rejecting.cls} no longer rejects apply_router_weight_on_input on the CUTLASS runner "
            f"(it rejected it: {reading.summary()})",
        )

    patch_module.__qualname__ = f"patch_{rejecting.part.replace('-', '_')}_module"
    return outcomes.reported_as(rejecting.part)(patch_module)
