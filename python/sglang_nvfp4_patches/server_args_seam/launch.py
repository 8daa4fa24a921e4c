"""One launch's facts where the seam's hook stands, each read once and shared by every question:
the record and resolution so far, the model config and architecture, the GPU as SGLang probes
it, what SGLang's own providers declare, and SGLang's whole resolution alone."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import importlib
import logging
import os
from collections.abc import Iterator
from functools import cached_property
from typing import Any

from sglang_nvfp4_patches.server_args_seam.seam import (
    BASE_MODULE,
    SERVER_ARGS_MODULE,
    OverrideSeam,
    SeamKind,
)
from sglang_nvfp4_patches.status import PATCHED_MARK
from sglang_nvfp4_patches.suspension import Suspension

PREDICATES = "_PREDICATE_OVERRIDE_FNS"  # a registry's (predicate, provider) pairs
# Inside it the hook answers nothing: SGLang's resolution alone (the twin record below).
sglang_alone_suspension = Suspension("server_args_seam_alone")


@contextlib.contextmanager
def sglang_logs_held_back() -> Iterator[None]:
    """SGLang's INFO and WARNING lines held back while a question asks SGLang something a
    second time (they come once, from SGLang's own call)."""
    sglang_logger = logging.getLogger("sglang")
    level = sglang_logger.level
    sglang_logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        sglang_logger.setLevel(level)


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


class Launch:
    """``record`` as ``seam``'s hook receives it (``hf_config``: the one a registry hands its
    providers; the record's model config holds it otherwise)."""

    def __init__(self, record: Any, seam: OverrideSeam, hf_config: Any = None) -> None:
        self.record = record
        self.seam = seam
        self._hf_config = hf_config

    @classmethod
    def resolved(cls, record: Any) -> Launch:
        """A record SGLang resolved: where it resolves once, the record keeps the operator's
        input and :attr:`view` reads the declarations; otherwise resolution wrote the record."""
        if hasattr(record, "resolve_once"):
            return cls(
                record, OverrideSeam(SeamKind.REGISTRY, importlib.import_module(BASE_MODULE))
            )
        module = importlib.import_module(SERVER_ARGS_MODULE)
        return cls(record, OverrideSeam(SeamKind.ADJUSTMENTS_METHOD, module))

    @property
    def pristine(self) -> bool:
        """Whether the record keeps the operator's input (resolution lives in declarations)."""
        return self.seam.kind is SeamKind.REGISTRY

    @cached_property
    def view(self) -> Any:
        """Resolution so far: a live view of the declarations over a pristine record, or the
        record itself (resolved in place so far)."""
        if not self.pristine:
            return self.record
        from sglang.srt.arg_groups.model_override_base import resolving_view

        return resolving_view(self.record)

    @cached_property
    def model_config(self) -> Any:
        if not self.pristine:
            return self.record.get_model_config()
        from sglang.srt.arg_groups.model_override_base import model_config_of

        return model_config_of(self.record)

    @cached_property
    def hf_config(self) -> Any:
        return self.model_config.hf_config if self._hf_config is None else self._hf_config

    @property
    def model_path(self) -> str:
        return self.view.model_path

    @cached_property
    def architecture(self) -> str | None:
        return next(iter(getattr(self.hf_config, "architectures", None) or ()), None)

    @cached_property
    def is_sm100(self) -> bool:
        """SGLang's SM10X probe as the release's model defaults read it: the process's
        platform where the record stays pristine, else the probe bound in the seam's module."""
        if not self.pristine:
            return bool(self.seam.module.is_sm100_supported())
        from sglang.srt.runtime_context import get_platform

        return bool(get_platform().is_sm100)

    @cached_property
    def kv_cache_quant_algo(self) -> object:
        """The checkpoint's KV-cache quantization as SGLang's model loader reads it
        (``get_quant_config``: ``quantization_config`` in config.json, else the checkpoint's
        ``hf_quant_config.json``), which ``--kv-cache-dtype auto`` follows."""
        if not self.model_config.quantization:
            return None
        from sglang.srt.configs.load_config import LoadConfig
        from sglang.srt.model_loader.weight_utils import get_quant_config

        # get_quant_config writes into the HF config's quantization dict, and SGLang shares
        # that config object: it reads a private copy here.
        isolated = copy.copy(self.model_config)
        isolated.hf_config = copy.deepcopy(self.model_config.hf_config)
        return getattr(get_quant_config(isolated, LoadConfig(), {}), "kv_cache_quant_algo", None)

    @cached_property
    def capability(self) -> tuple[int, int] | None:
        return device_capability(self.view.device)

    @cached_property
    def declared(self) -> dict[str, Any]:
        """What SGLang's own providers for this architecture declare before the hook's
        provider (those keyed by its name, then predicate providers registered before it:
        providers of one resolution do not see each other's declarations), asked as SGLang
        calls them, its log lines held back; one that raises declares nothing here (SGLang's
        own call of it raises). Nothing where the record was adjusted in place."""
        if self.seam.kind is SeamKind.ADJUSTMENTS_METHOD:
            return {}
        module, architecture = self.seam.module, self.architecture
        providers = list(module._MODEL_OVERRIDE_FNS.get(architecture, ()))
        for predicate, provider in getattr(module, PREDICATES, ()):
            if getattr(provider, PATCHED_MARK, False):
                break
            if isinstance(architecture, str) and predicate(architecture):
                providers.append(provider)
        declared: dict[str, Any] = {}
        with sglang_logs_held_back():
            for provider in providers:
                with contextlib.suppress(Exception):
                    found = provider(self.record, self.hf_config)
                    declared.update(found if isinstance(found, dict) else {})
        return declared

    def sglang_alone(self, field: str) -> Any:
        """``field`` as SGLang's whole resolution publishes it for this launch's raw
        arguments with no question answered: what a model's own later passes choose, which a
        provider cannot see. Asked of a twin record built from the same raw fields, with
        SGLang's log lines held back and the process environment (which resolution may write)
        put back."""
        module = importlib.import_module(SERVER_ARGS_MODULE)
        cls = type(self.record)
        reader = getattr(module, "record_fields", dataclasses.fields)
        raw = {
            f.name: getattr(self.record, f.name) for f in reader(cls) if getattr(f, "init", True)
        }
        environ = dict(os.environ)
        try:
            with sglang_alone_suspension.suspended(), sglang_logs_held_back():
                twin = cls(**raw)
                if hasattr(twin, "resolve_once"):
                    twin.resolve_once()
                if hasattr(twin, "resolved_dict"):
                    return twin.resolved_dict().get(field)
                return getattr(twin, field, None)
        finally:
            os.environ.clear()
            os.environ.update(environ)
