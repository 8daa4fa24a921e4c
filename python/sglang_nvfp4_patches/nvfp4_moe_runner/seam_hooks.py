"""The patch's hooks, one per kind of seam (:mod:`..override_seam` finds the one this SGLang
has): a provider in a model-override registry, which declares ``moe_runner_backend``, or an
AROUND hook of ``ServerArgs._handle_model_specific_adjustments``, which sets it first, as if
the user had typed ``--moe-runner-backend flashinfer_cutlass``. Each decides per launch
(:mod:`.decision`) and changes nothing else."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import Any

from sglang_nvfp4_patches.models import GEMMA4_ARCHITECTURES, LLAMA4_ARCHITECTURES
from sglang_nvfp4_patches.nvfp4_moe_runner import decision, suspension
from sglang_nvfp4_patches.nvfp4_moe_runner.launch_facts import record_facts, resolving_facts
from sglang_nvfp4_patches.nvfp4_moe_runner.rule import LaunchFacts
from sglang_nvfp4_patches.override_seam import OVERRIDES_MODULE, OverrideSeam, SeamKind
from sglang_nvfp4_patches.sglang_hooks import hook_count, install_hook
from sglang_nvfp4_patches.status import PATCHED_MARK

ARCHITECTURES = GEMMA4_ARCHITECTURES | LLAMA4_ARCHITECTURES
FIELD = "moe_runner_backend"


def declared_before(
    registry: dict[str, list[Callable[..., Any]]], server_args: Any, hf_config: Any, ours: Any
) -> dict[str, Any]:
    """What the providers registered before ours for this architecture declare (SGLang's own
    model defaults: providers of one resolution do not see each other's declarations), asked
    with SGLang's log lines held back, as SGLang calls them; one that raises declares nothing
    here (SGLang's own call of it raises). This plugin's other providers are not asked."""
    architecture = next(iter(getattr(hf_config, "architectures", None) or ()), None)
    declared: dict[str, Any] = {}
    sglang_logger = logging.getLogger("sglang")
    level = sglang_logger.level
    sglang_logger.setLevel(logging.ERROR)  # their INFO lines come once, from SGLang's own call
    try:
        for provider in registry.get(architecture, ()):
            if provider is ours:
                break
            if getattr(provider, PATCHED_MARK, False):  # another patch's: not a model default
                continue
            try:
                found = provider(server_args, hf_config)
            except Exception:
                continue
            declared.update(found if isinstance(found, dict) else {})
    finally:
        sglang_logger.setLevel(level)
    return declared


def _declaration(facts: LaunchFacts, declared: dict[str, Any], model_path: str) -> dict[str, Any]:
    facts = dataclasses.replace(
        facts,
        quantization=declared.get("quantization", facts.quantization),
        runner=declared.get(FIELD, facts.runner),
    )
    chosen = decision.decide_and_log(facts, model_path)
    return {} if chosen.runner is None else {FIELD: chosen.runner}


def registry_provider(server_args: Any, hf_config: Any) -> dict[str, Any]:
    """Model-override registry provider (``model_override_base``: reads the resolving view)."""
    if suspension.is_suspended():
        return {}
    from sglang.srt.arg_groups import model_override_base as base

    declared = declared_before(base._MODEL_OVERRIDE_FNS, server_args, hf_config, registry_provider)
    model_path = base.resolving_view(server_args).model_path
    return _declaration(resolving_facts(server_args, hf_config), declared, model_path)


def overrides_provider(server_args: Any, hf_config: Any) -> dict[str, Any]:
    """``arg_groups.overrides`` registry provider: those releases hand providers the record."""
    if suspension.is_suspended():
        return {}
    import importlib

    registry = importlib.import_module(OVERRIDES_MODULE)._MODEL_OVERRIDE_FNS
    declared = declared_before(registry, server_args, hf_config, overrides_provider)
    return _declaration(record_facts(server_args, hf_config), declared, server_args.model_path)


def runner_adjustments_hook(
    original: Callable[..., Any], server_args: Any, *args: Any, **kw: Any
) -> Any:
    """Set the MoE runner before SGLang's in-place model adjustments read it."""
    if not suspension.is_suspended():
        chosen = decision.decide_and_log(record_facts(server_args), server_args.model_path)
        if chosen.runner is not None:
            server_args.moe_runner_backend = chosen.runner
    return original(server_args, *args, **kw)


for _provider in (registry_provider, overrides_provider):
    setattr(_provider, PATCHED_MARK, True)


def _provider_for(seam: OverrideSeam) -> Callable[..., dict[str, Any]]:
    return registry_provider if seam.kind is SeamKind.REGISTRY else overrides_provider


def installed(seam: OverrideSeam) -> bool:
    """Whether the hook is on the seam, once (every architecture, for a registry)."""
    if seam.kind is SeamKind.ADJUSTMENTS_METHOD:
        method = seam.module.ServerArgs.__dict__[seam.target().rsplit(".", 1)[1]]
        return hook_count(method, runner_adjustments_hook) == 1
    provider, registered = _provider_for(seam), seam.providers()
    return all(list(registered.get(a, ())).count(provider) == 1 for a in ARCHITECTURES)


def install(seam: OverrideSeam) -> None:
    """Put the hook on the seam (idempotent)."""
    if seam.kind is SeamKind.ADJUSTMENTS_METHOD:
        install_hook(seam.target(), runner_adjustments_hook)
        return
    provider, registered = _provider_for(seam), seam.providers()
    for architecture in sorted(ARCHITECTURES):
        if provider not in registered.get(architecture, ()):
            seam.module.register_model_override(architecture)(provider)
