"""Where SGLang has no model-override registry (docs/releases.md),
``ServerArgs._handle_model_specific_adjustments`` sets the Gemma 4 default in place. An AROUND
hook (SGLang's ``HookRegistry``) sets ``attention_backend`` first, exactly as if the user had
passed ``--attention-backend triton``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sglang_nvfp4_patches.gemma4_attention import rule_state
from sglang_nvfp4_patches.gemma4_attention.rule import SAFE_BACKEND
from sglang_nvfp4_patches.gemma4_attention.server_args_facts import record_facts
from sglang_nvfp4_patches.override_seam import (
    ADJUSTMENTS_METHOD,
    SERVER_ARGS_MODULE,
    OverrideSeam,
)
from sglang_nvfp4_patches.sglang_hooks import hook_count, install_hook


def adjustments_hook(original: Callable[..., Any], server_args: Any, *args: Any, **kw: Any) -> Any:
    """Default ``attention_backend`` before SGLang's in-place Gemma 4 branch."""
    if not rule_state.is_suspended():
        rule_state.mark_seen(server_args)
        facts = record_facts(server_args, SERVER_ARGS_MODULE)
        if rule_state.decide_and_log(facts, server_args.model_path).attention_backend is not None:
            server_args.attention_backend = SAFE_BACKEND
    return original(server_args, *args, **kw)


@dataclass(frozen=True)
class MethodLayout:
    seam: OverrideSeam

    name = "ServerArgs._handle_model_specific_adjustments hook"

    def method(self) -> Callable[..., Any]:
        return self.seam.module.ServerArgs.__dict__[ADJUSTMENTS_METHOD]

    def installed(self) -> bool:
        return hook_count(self.method(), adjustments_hook) == 1

    def install(self) -> None:
        install_hook(self.seam.target(), adjustments_hook)

    def where(self) -> str:
        return f"{self.name} installed"
