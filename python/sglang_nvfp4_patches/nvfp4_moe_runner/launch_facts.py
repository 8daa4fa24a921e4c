"""One launch's facts, read where each seam's hook stands: the MoE layer settings its config
gives (any architecture), the checkpoint's quantization as SGLang detects it, the
quantization and MoE runner resolution has so far (the user's flags, or a model override's
declarations), and the GPU's capability."""

from __future__ import annotations

import contextlib
import importlib
import logging
from collections.abc import Iterator
from typing import Any

from sglang_nvfp4_patches.models import moe_settings
from sglang_nvfp4_patches.nvfp4_moe_runner.rule import LaunchFacts


def _settings(hf_config: Any) -> str | None:
    found = moe_settings(hf_config)
    return None if found is None else found.key


def device_capability(device: str | None) -> tuple[int, int] | None:
    """The CUDA GPU's compute capability as SGLang probes it (``None`` off CUDA)."""
    if device not in (None, "cuda") and not str(device).startswith("cuda:"):
        return None
    try:  # where SGLang has them: the process's platform facts (overridable)
        from sglang.srt.runtime_context import get_platform

        platform = get_platform()
        hip, capability = bool(platform.is_hip), platform.device_capability
    except (ImportError, AttributeError):
        common = importlib.import_module("sglang.srt.utils.common")
        hip, capability = bool(common.is_hip()), common.get_device_capability()
    if hip or not capability or None in tuple(capability):
        return None
    major, minor = capability
    return int(major), int(minor)


def resolving_facts(server_args: Any, hf_config: Any) -> LaunchFacts:
    """``model_override_base`` registry: the record keeps the user's input; resolution so far is
    read through the resolving view, the checkpoint through the record's memoized ModelConfig."""
    from sglang.srt.arg_groups.model_override_base import model_config_of, resolving_view

    view = resolving_view(server_args)
    return LaunchFacts(
        settings=_settings(hf_config),
        quantization=view.quantization,
        runner=view.moe_runner_backend,
        capability=device_capability(view.device),
        checkpoint_quantization=lambda: model_config_of(server_args).quantization,
    )


def record_facts(server_args: Any, hf_config: Any = None) -> LaunchFacts:
    """Older seams hand over the record itself, resolved in place so far (the adjustments
    method no HF config: the record's model config holds it)."""
    if hf_config is None:
        hf_config = server_args.get_model_config().hf_config
    return LaunchFacts(
        settings=_settings(hf_config),
        quantization=server_args.quantization,
        runner=server_args.moe_runner_backend,
        capability=device_capability(server_args.device),
        checkpoint_quantization=lambda: server_args.get_model_config().quantization,
    )


@contextlib.contextmanager
def sglang_logs_held_back() -> Iterator[None]:
    """SGLang's INFO and WARNING lines held back while the hook asks SGLang something a second
    time (they come once, from SGLang's own call)."""
    sglang_logger = logging.getLogger("sglang")
    level = sglang_logger.level
    sglang_logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        sglang_logger.setLevel(level)


def sglang_alone(server_args: Any) -> str | None:
    """The MoE runner SGLang's whole resolution publishes for this launch's raw arguments
    with this patch suspended: what a model's own later passes choose (DeepSeek's on SM100
    runs after the providers), which a provider cannot see. Asked of a twin record built from
    the same raw fields, with SGLang's log lines held back and the process environment
    (which resolution may write) put back."""
    import dataclasses
    import os

    from sglang_nvfp4_patches.nvfp4_moe_runner.suspension import suspended

    module = importlib.import_module("sglang.srt.server_args")
    cls = type(server_args)
    reader = getattr(module, "record_fields", dataclasses.fields)
    raw = {f.name: getattr(server_args, f.name) for f in reader(cls) if getattr(f, "init", True)}
    environ = dict(os.environ)
    try:
        with suspended(), sglang_logs_held_back():
            twin = cls(**raw)
            if hasattr(twin, "resolve_once"):
                twin.resolve_once()
            if hasattr(twin, "resolved_dict"):
                return twin.resolved_dict().get("moe_runner_backend")
            return getattr(twin, "moe_runner_backend", None)
    finally:
        os.environ.clear()
        os.environ.update(environ)
