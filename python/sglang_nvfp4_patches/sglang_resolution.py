"""Run SGLang's own server-args resolution for a config directory on a simulated GPU.

``explain`` and ``doctor`` must show what SGLang itself would pick, never a copy of its rules,
so this builds a real ``ServerArgs`` and lets SGLang resolve it with the GPU facts replaced.
SGLang 0.5.20+ has an official seam for that, ``runtime_context.override_platform``.
"""

from __future__ import annotations

import contextlib
import io
import logging
import sys
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sglang_nvfp4_patches.errors import UsageError
from sglang_nvfp4_patches.gpu_profiles import GpuProfile
from sglang_nvfp4_patches.status import sglang_version

_FIELDS = (
    "attention_backend",
    "prefill_attention_backend",
    "decode_attention_backend",
    "moe_runner_backend",
    "quantization",
)


@dataclass(frozen=True)
class ResolvedBackends:
    attention_backend: str | None
    prefill_attention_backend: str | None
    decode_attention_backend: str | None
    moe_runner_backend: str | None
    quantization: str | None


class ServerArgsRejected(UsageError):
    """SGLang's own ``ServerArgs`` refuses the arguments (as ``launch_server`` would)."""


@contextlib.contextmanager
def _quiet_sglang() -> Iterator[None]:
    """SGLang logs and prints a page per resolution; keep the table readable."""
    sglang_logger = logging.getLogger("sglang")
    previous = sglang_logger.level
    sglang_logger.setLevel(logging.ERROR)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            yield
    finally:
        sglang_logger.setLevel(previous)


# SGLang 0.5.13-0.5.18 ask ``sglang.srt.utils.common`` probes, imported by name into many
# modules: each binding is replaced for the duration (``is_cuda`` stays false on purpose, so
# nothing tries to load CUDA libraries; ``device="cuda"`` is passed instead).
_LEGACY_PROBES: dict[str, str] = {
    "is_sm90_supported": "is_sm90",
    "is_sm100_supported": "is_sm100",
    "is_sm100_or_sm110_supported": "is_sm100_or_sm110",
    "is_sm110_supported": "is_sm110",
    "is_sm120_supported": "is_sm120",
    "is_blackwell_supported": "is_blackwell",
    "is_blackwell": "is_blackwell",
    "is_hopper_with_cuda_12_3": "is_hopper_with_cuda_12_3",
}


def _legacy_fakes(profile: GpuProfile) -> dict[str, Callable[..., Any]]:
    facts = profile.platform_facts()
    fakes: dict[str, Callable[..., Any]] = {
        name: (lambda value=facts[fact], *_a, **_k: value) for name, fact in _LEGACY_PROBES.items()
    }
    fakes["get_device_capability"] = lambda *_a, **_k: profile.capability
    fakes["get_device_sm"] = lambda *_a, **_k: facts["device_sm"]
    return fakes


@contextlib.contextmanager
def _rebound_probes(profile: GpuProfile) -> Iterator[None]:
    import importlib

    common = importlib.import_module("sglang.srt.utils.common")
    originals = {
        name: getattr(common, name) for name in _legacy_fakes(profile) if hasattr(common, name)
    }
    fakes = {name: fake for name, fake in _legacy_fakes(profile).items() if name in originals}

    def sglang_modules() -> list[Any]:
        return [m for name, m in list(sys.modules.items()) if name.startswith("sglang")]

    for module in sglang_modules():
        for name, original in originals.items():
            if getattr(module, name, None) is original:
                setattr(module, name, fakes[name])
    try:
        yield
    finally:
        # Modules first imported inside the block copied a fake with `from X import Y`:
        # every module holding one gets the original back, not only those seen on entry.
        for module in sglang_modules():
            for name, fake in fakes.items():
                if getattr(module, name, None) is fake:
                    setattr(module, name, originals[name])


@contextlib.contextmanager
def simulated_gpu(profile: GpuProfile) -> Iterator[None]:
    """Make SGLang believe it runs on ``profile``'s GPU.

    0.5.20+ has an official seam, ``runtime_context.override_platform``; older releases
    get their capability probes rebound instead.
    """
    try:
        from sglang.srt.runtime_context import _PLATFORM_PROBES, _PLATFORM_VALUES, override_platform
    except ImportError:
        with _rebound_probes(profile):
            yield
        return
    known = set(_PLATFORM_PROBES) | set(_PLATFORM_VALUES)
    facts = {k: v for k, v in profile.platform_facts().items() if k in known}
    with override_platform(**facts):
        yield


def resolved_server_args(
    model_dir: Path,
    attention_backend: str | None = None,
    quantization: str | None = None,
    **flags: Any,
) -> Any:
    """A ``ServerArgs`` for ``model_dir`` resolved by SGLang (call inside :func:`simulated_gpu`);
    ``flags`` are further ``ServerArgs`` fields as a user gives them."""
    from sglang.srt.server_args import ServerArgs

    kwargs: dict[str, Any] = {
        "model_path": str(model_dir),
        "skip_tokenizer_init": True,
        "device": "cuda",
        **flags,
    }
    if attention_backend is not None:
        kwargs["attention_backend"] = attention_backend
    if quantization is not None:
        kwargs["quantization"] = quantization
    server_args = ServerArgs(**kwargs)  # 0.5.13-0.5.18 resolve here, in __post_init__
    if hasattr(server_args, "resolve_once"):
        server_args.resolve_once()
    return server_args


def resolve(
    model_dir: Path,
    profile: GpuProfile,
    attention_backend: str | None = None,
    quantization: str | None = None,
    **flags: Any,
) -> ResolvedBackends:
    """SGLang's resolved backends for ``model_dir`` on ``profile`` (flags as a user gives them;
    ``flags``: further ``ServerArgs`` fields)."""
    try:
        with _quiet_sglang(), simulated_gpu(profile):
            server_args = resolved_server_args(model_dir, attention_backend, quantization, **flags)
            if hasattr(server_args, "resolved_dict"):
                resolved = server_args.resolved_dict()
            else:
                resolved = {field: getattr(server_args, field, None) for field in _FIELDS}
    # SGLang validates server arguments with ValueError and assert; either is its refusal.
    except (ValueError, AssertionError) as error:
        raise ServerArgsRejected(
            f"SGLang {sglang_version()} refuses these server arguments for {model_dir} on "
            f"simulated {profile.name}: {_reason(error)}"
        ) from error
    return ResolvedBackends(
        attention_backend=resolved.get("attention_backend"),
        prefill_attention_backend=resolved.get("prefill_attention_backend"),
        decode_attention_backend=resolved.get("decode_attention_backend"),
        moe_runner_backend=resolved.get("moe_runner_backend"),
        quantization=resolved.get("quantization"),
    )


def _reason(error: BaseException) -> str:
    """SGLang's message, or for a bare ``assert`` the line that failed."""
    if str(error):
        return str(error)
    frames = traceback.extract_tb(error.__traceback__)
    line = (frames[-1].line or "").strip() if frames else ""
    return f"{type(error).__name__} at `{line}`" if line else type(error).__name__
