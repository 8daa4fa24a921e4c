"""The patch's hooks, one per kind of seam (:mod:`..override_seam` finds the one this SGLang
has), each reaching every architecture: a provider registered in a model-override registry
under a predicate every architecture meets (SGLang runs such providers after the
architecture's own), which declares ``moe_runner_backend``; or an AROUND hook of
``ServerArgs._handle_model_specific_adjustments``, which sets it after SGLang's own model
adjustments, where they left it at ``auto``. Each decides per launch (:mod:`.decision`) and
changes nothing else."""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from typing import Any

from sglang_nvfp4_patches.nvfp4_moe_runner import decision, suspension
from sglang_nvfp4_patches.nvfp4_moe_runner.launch_facts import (
    record_facts,
    resolving_facts,
    sglang_alone,
    sglang_logs_held_back,
)
from sglang_nvfp4_patches.nvfp4_moe_runner.rule import LaunchFacts
from sglang_nvfp4_patches.override_seam import OVERRIDES_MODULE, OverrideSeam, SeamKind
from sglang_nvfp4_patches.sglang_hooks import hook_count, install_hook
from sglang_nvfp4_patches.status import PATCHED_MARK, PatchUnavailable

FIELD = "moe_runner_backend"
PREDICATES = "_PREDICATE_OVERRIDE_FNS"  # the registry's (predicate, provider) pairs
REGISTER_PREDICATE = "register_model_override_predicate"


def every_architecture(_architecture: str) -> bool:
    """The predicate the provider is registered under: the decision reads the checkpoint's
    MoE layer, never its name."""
    return True


def model_defaults(module: Any, server_args: Any, hf_config: Any, ours: Any) -> dict[str, Any]:
    """What SGLang's own providers for this architecture declare before ours runs (those keyed
    by its name, then predicate providers registered before ours: providers of one resolution
    do not see each other's declarations), asked with SGLang's log lines held back, as SGLang
    calls them; one that raises declares nothing here (SGLang's own call of it raises). This
    plugin's other providers are not asked."""
    architecture = next(iter(getattr(hf_config, "architectures", None) or ()), None)
    providers = list(module._MODEL_OVERRIDE_FNS.get(architecture, ()))
    for predicate, provider in getattr(module, PREDICATES, ()):
        if provider is ours:
            break
        if isinstance(architecture, str) and predicate(architecture):
            providers.append(provider)
    declared: dict[str, Any] = {}
    with sglang_logs_held_back():
        for provider in providers:
            if getattr(provider, PATCHED_MARK, False):  # another patch's: not a model default
                continue
            try:
                found = provider(server_args, hf_config)
            except Exception:
                continue
            declared.update(found if isinstance(found, dict) else {})
    return declared


def _declaration(
    facts: LaunchFacts, declared: dict[str, Any], model_path: str, server_args: Any
) -> dict[str, Any]:
    """Declare the runner where the decision publishes one and SGLang's whole resolution,
    left alone, would publish none (a model's later pass may: that one stands)."""
    facts = dataclasses.replace(
        facts,
        quantization=declared.get("quantization", facts.quantization),
        runner=declared.get(FIELD, facts.runner),
    )
    chosen = decision.decide_and_log(facts, model_path, lambda: sglang_alone(server_args))
    return {} if chosen.runner is None else {FIELD: chosen.runner}


def registry_provider(server_args: Any, hf_config: Any) -> dict[str, Any]:
    """Model-override registry provider (``model_override_base``: reads the resolving view)."""
    if suspension.is_suspended():
        return {}
    from sglang.srt.arg_groups import model_override_base as base

    declared = model_defaults(base, server_args, hf_config, registry_provider)
    model_path = base.resolving_view(server_args).model_path
    facts = resolving_facts(server_args, hf_config)
    return _declaration(facts, declared, model_path, server_args)


def overrides_provider(server_args: Any, hf_config: Any) -> dict[str, Any]:
    """``arg_groups.overrides`` registry provider: those releases hand providers the record."""
    if suspension.is_suspended():
        return {}
    module = importlib.import_module(OVERRIDES_MODULE)
    declared = model_defaults(module, server_args, hf_config, overrides_provider)
    facts = record_facts(server_args, hf_config)
    return _declaration(facts, declared, server_args.model_path, server_args)


def runner_adjustments_hook(
    original: Callable[..., Any], server_args: Any, *args: Any, **kw: Any
) -> Any:
    """Set the MoE runner where SGLang's in-place model adjustments left it at ``auto``."""
    result = original(server_args, *args, **kw)
    if not suspension.is_suspended():
        chosen = decision.decide_and_log(record_facts(server_args), server_args.model_path)
        if chosen.runner is not None:
            server_args.moe_runner_backend = chosen.runner
    return result


for _provider in (registry_provider, overrides_provider):
    setattr(_provider, PATCHED_MARK, True)


def _provider_for(seam: OverrideSeam) -> Callable[..., dict[str, Any]]:
    return registry_provider if seam.kind is SeamKind.REGISTRY else overrides_provider


def _registered(seam: OverrideSeam) -> list[Any]:
    return [provider for _, provider in getattr(seam.module, PREDICATES, ())]


def installed(seam: OverrideSeam) -> bool:
    """Whether the hook is on the seam, once."""
    if seam.kind is SeamKind.ADJUSTMENTS_METHOD:
        method = seam.module.ServerArgs.__dict__[seam.target().rsplit(".", 1)[1]]
        return hook_count(method, runner_adjustments_hook) == 1
    return _registered(seam).count(_provider_for(seam)) == 1


def install(seam: OverrideSeam) -> None:
    """Put the hook on the seam (idempotent); :class:`PatchUnavailable` where a registry
    cannot reach every architecture."""
    if seam.kind is SeamKind.ADJUSTMENTS_METHOD:
        install_hook(seam.target(), runner_adjustments_hook)
        return
    register = getattr(seam.module, REGISTER_PREDICATE, None)
    if register is None or not isinstance(getattr(seam.module, PREDICATES, None), list):
        raise PatchUnavailable(
            f"the {seam.name} has no {REGISTER_PREDICATE}, so no provider reaches every "
            "architecture"
        )
    provider = _provider_for(seam)
    if provider not in _registered(seam):
        register(every_architecture)(provider)
