"""Layouts with a model-override registry: providers return ``{field: value}`` declarations,
run in registration order, and the last declaration of a field wins. Ours is registered
after SGLang's own Gemma 4 provider, so it re-declares ``attention_backend`` when it acts.

* ``sglang.srt.arg_groups.model_override_base``: providers see a pristine record and read
  resolution so far through ``resolving_view``;
* ``sglang.srt.arg_groups.overrides`` (older releases): providers read the record.

Which release has which: docs/releases.md.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sglang_nvfp4_patches.gemma4_attention import rule_state
from sglang_nvfp4_patches.gemma4_attention.rule import (
    SAFE_BACKEND,
    Gemma4Facts,
)
from sglang_nvfp4_patches.gemma4_attention.server_args_facts import (
    pristine_record_facts,
    record_facts,
)
from sglang_nvfp4_patches.models import GEMMA4_ARCHITECTURES
from sglang_nvfp4_patches.override_seam import OVERRIDES_MODULE, OverrideSeam
from sglang_nvfp4_patches.status import PATCHED_MARK


@dataclass(frozen=True)
class RegistryLayout:
    """``register_model_override`` + ``_MODEL_OVERRIDE_FNS`` in the seam's module."""

    seam: OverrideSeam
    provider: Callable[[Any, Any], dict[str, Any]]

    @property
    def name(self) -> str:
        return self.seam.name

    @property
    def module(self) -> Any:
        return self.seam.module

    def registered(self) -> dict[str, list[Callable[..., Any]]]:
        return self.seam.providers()

    def installed(self) -> bool:
        return all(self.provider in self.registered().get(a, ()) for a in GEMMA4_ARCHITECTURES)

    def install(self) -> None:
        for architecture in sorted(GEMMA4_ARCHITECTURES):
            if self.provider not in self.registered().get(architecture, ()):
                self.module.register_model_override(architecture)(self.provider)

    def where(self) -> str:
        last = all(self.registered()[a][-1] is self.provider for a in GEMMA4_ARCHITECTURES)
        order = "last" if last else "registered (another provider follows it)"
        return f"{self.name}: provider {order} for Gemma 4"


def _declaration(facts: Gemma4Facts, model_path: str) -> dict[str, Any]:
    decision = rule_state.decide_and_log(facts, model_path)
    return {} if decision.attention_backend is None else {"attention_backend": SAFE_BACKEND}


def registry_provider(server_args: Any, hf_config: Any) -> dict[str, Any]:
    """``model_override_base`` provider: reads the live resolving view, never writes a field."""
    if rule_state.is_suspended():
        return {}
    from sglang.srt.arg_groups.model_override_base import resolving_view

    rule_state.mark_seen(server_args)
    cfg = resolving_view(server_args)
    return _declaration(pristine_record_facts(server_args, cfg), cfg.model_path)


def overrides_module_provider(server_args: Any, hf_config: Any) -> dict[str, Any]:
    """``arg_groups.overrides`` provider: that registry hands providers the pristine record."""
    if rule_state.is_suspended():
        return {}
    rule_state.mark_seen(server_args)
    facts = record_facts(server_args, OVERRIDES_MODULE)
    return _declaration(facts, server_args.model_path)


for _provider in (registry_provider, overrides_module_provider):
    setattr(_provider, PATCHED_MARK, True)
