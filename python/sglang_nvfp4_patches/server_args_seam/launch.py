"""One launch's facts where the seam's hook stands, each read once and shared by every question
(the record, resolution so far, model config, GPU, SGLang's own declarations and resolution)."""

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
from sglang_nvfp4_patches.sglang_hooks import PATCHED_MARK
from sglang_nvfp4_patches.suspension import Suspension

PREDICATES = "_PREDICATE_OVERRIDE_FNS"  # a registry's (predicate, provider) pairs
# Inside it the hook answers nothing: SGLang's resolution alone (the twin record below).
sglang_alone_suspension = Suspension("server_args_seam_alone")


@contextlib.contextmanager
def sglang_logs_held_back() -> Iterator[None]:
    """SGLang's INFO and WARNING lines held back while SGLang is asked something again."""
    sglang_logger = logging.getLogger("sglang")
    level = sglang_logger.level
    sglang_logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        sglang_logger.setLevel(level)


@contextlib.contextmanager
def environ_kept() -> Iterator[None]:
    """Each variable the block sets, changes or removes put back as it was, the others left
    alone: ``os.environ`` is never cleared (another thread of the server reads it meanwhile)."""
    before = dict(os.environ)
    try:
        yield
    finally:
        for name in [name for name in os.environ if name not in before]:
            os.environ.pop(name, None)
        for name, value in before.items():
            if os.environ.get(name) != value:
                os.environ[name] = value


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


def quant_config_of(model_config: Any) -> Any:
    """The checkpoint's quantization config as SGLang's model loader builds it (``None``: not
    quantized), from config.json or ``hf_quant_config.json``."""
    if not model_config.quantization:
        return None
    from sglang.srt.configs.load_config import LoadConfig
    from sglang.srt.model_loader.weight_utils import get_quant_config

    # get_quant_config writes into the HF config, which SGLang shares: a private copy here.
    isolated = copy.copy(model_config)
    isolated.hf_config = copy.deepcopy(model_config.hf_config)
    return get_quant_config(isolated, LoadConfig(), {})


def _record_fields(cls: type) -> tuple[Any, ...]:
    """The ServerArgs record's fields, as this release lists them."""
    module = importlib.import_module(SERVER_ARGS_MODULE)
    return tuple(getattr(module, "record_fields", dataclasses.fields)(cls))


class Launch:
    """``record`` as ``seam``'s hook receives it (``hf_config``: the one a registry hands its
    providers; the record's model config holds it otherwise)."""

    def __init__(
        self,
        record: Any,
        seam: OverrideSeam,
        hf_config: Any = None,
        given: dict[str, Any] | None = None,
    ) -> None:
        self.record = record
        self.seam = seam
        self._hf_config = hf_config
        self._given = given  # where resolution writes the record: its fields before that

    def operator_gave(self, field: str) -> bool:
        """Whether the operator set ``field`` (a value other than its default): the record's,
        else as it stood before SGLang's adjustments wrote the record in place."""
        try:
            fields = _record_fields(type(self.record))
        except TypeError:  # not a dataclass (a hand-built record): None is the default
            fields = ()
        declared = next((f for f in fields if f.name == field), None)
        value = getattr(self.record, field) if self._given is None else self._given.get(field)
        default = None if declared is None else declared.default
        if default is dataclasses.MISSING:
            factory = declared.default_factory
            default = None if factory is dataclasses.MISSING else factory()
        return value != default

    @classmethod
    def resolved(cls, record: Any) -> Launch:
        """A record SGLang resolved (kept pristine where it resolves once)."""
        kind, module = SeamKind.ADJUSTMENTS_METHOD, SERVER_ARGS_MODULE
        if hasattr(record, "resolve_once"):
            kind, module = SeamKind.REGISTRY, BASE_MODULE
        return cls(record, OverrideSeam(kind, importlib.import_module(module)))

    @property
    def pristine(self) -> bool:
        """Whether the record keeps the operator's input (resolution lives in declarations)."""
        return self.seam.kind is SeamKind.REGISTRY

    @cached_property
    def view(self) -> Any:
        """Resolution so far: a view of the declarations over a pristine record, or the record."""
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
        """SGLang's SM10X probe as the release's model defaults read it (without the probe:
        the GPU's major version)."""
        if not self.pristine:
            probe = getattr(self.seam.module, "is_sm100_supported", None)
            return bool(probe()) if probe else (self.capability or (0,))[0] == 10
        from sglang.srt.runtime_context import get_platform

        return bool(get_platform().is_sm100)

    @cached_property
    def kv_cache_quant_algo(self) -> object:
        """The checkpoint's KV-cache quantization, which ``--kv-cache-dtype auto`` follows."""
        return getattr(quant_config_of(self.model_config), "kv_cache_quant_algo", None)

    @cached_property
    def capability(self) -> tuple[int, int] | None:
        return device_capability(self.view.device)

    @cached_property
    def declared(self) -> dict[str, Any]:
        """What SGLang's own providers for this architecture declare before the hook's (one
        resolution's providers do not see each other's); one that raises declares nothing."""
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
        """``field`` as SGLang's whole resolution alone publishes it for this launch (a model's
        later passes, which a provider cannot see), asked of a twin record; the process
        environment, which resolution may write, is put back."""
        cls = type(self.record)
        raw = {
            f.name: getattr(self.record, f.name)
            for f in _record_fields(cls)
            if getattr(f, "init", True)
        }
        with environ_kept(), sglang_alone_suspension.suspended(), sglang_logs_held_back():
            twin = cls(**raw)
            if hasattr(twin, "resolve_once"):
                twin.resolve_once()
            if hasattr(twin, "resolved_dict"):
                return twin.resolved_dict().get(field)
            return getattr(twin, field, None)
