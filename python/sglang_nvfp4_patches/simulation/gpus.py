"""The GPUs the CPU simulation can stand for, and SGLang made to believe it runs on one (pure
to import: SGLang and torch are imported only inside the context managers)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from sglang_nvfp4_patches.simulation.patching import attribute, rebound_in_sglang


@dataclass(frozen=True)
class GpuProfile:
    name: str
    label: str
    capability: tuple[int, int]
    gpu_names: tuple[str, ...] = ()  # what --gpu also takes: the GPUs' own names

    @property
    def major(self) -> int:
        return self.capability[0]

    def platform_facts(self) -> dict[str, object]:
        """Yes/no facts as SGLang derives them from the capability (CUDA >= 12.8 assumed)."""
        major = self.major
        return {
            "is_cuda": True,
            **dict.fromkeys(("is_hip", "is_npu", "is_xpu", "is_musa", "is_mps", "has_amx"), False),
            "is_sm90": major == 9,
            "is_sm100": major == 10,
            "is_sm100_or_sm110": major in (10, 11),
            "is_sm110": major == 11,
            "is_sm120": major == 12,
            "is_blackwell": major in (10, 11, 12),
            "is_hopper_with_cuda_12_3": major == 9,
            "has_flashinfer": True,
            "device_capability": self.capability,
            "device_sm": major * 10 + self.capability[1],
        }


GPU_PROFILES: dict[str, GpuProfile] = {
    profile.name: profile
    for profile in (
        GpuProfile("sm90", "H100/H200 (SM90)", (9, 0), ("h100", "h200")),
        GpuProfile("sm100", "B200 (SM100)", (10, 0), ("b200", "gb200")),
        GpuProfile("sm103", "GB300 (SM103)", (10, 3), ("b300", "gb300")),
        GpuProfile("sm120", "RTX PRO 6000 (SM120)", (12, 0), ("rtx-pro-6000",)),
        GpuProfile("sm121", "DGX Spark GB10 (SM121)", (12, 1), ("gb10", "dgx-spark")),
    )
}


def gpu_profile(name: str) -> GpuProfile | None:
    """The profile ``name`` means: an SM name (``sm100``) or a GPU's (``B200``), any case."""
    wanted = name.strip().lower()
    return next(
        (p for p in GPU_PROFILES.values() if wanted == p.name or wanted in p.gpu_names), None
    )


def gpu_choices() -> str:
    """``sm90 (h100, h200), sm100 (b200, gb200), ...``: what --gpu takes."""
    return ", ".join(f"{p.name} ({', '.join(p.gpu_names)})" for p in GPU_PROFILES.values())


# Releases without ``runtime_context.override_platform`` ask these ``sglang.srt.utils.common``
# probes (``is_cuda`` stays false: nothing loads CUDA libraries); by the major alone.
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


COMMON = "sglang.srt.utils.common"
# Probes of one exact capability, where a release has them (0.5.23: ``is_sm120`` is 12.0 only),
# read on paths none of the patches touch, simulated all the same.
_EXACT_PROBES: dict[str, tuple[int, int]] = {"is_sm120": (12, 0), "is_sm121": (12, 1)}


def _probe_fakes(profile: GpuProfile, legacy: bool) -> dict[str, Callable[..., Any]]:
    """Stand-ins of the exact-capability probes and, with ``legacy``, of the others."""
    facts = profile.platform_facts()
    values: dict[str, object] = {n: profile.capability == c for n, c in _EXACT_PROBES.items()}
    if legacy:
        values.update({name: facts[fact] for name, fact in _LEGACY_PROBES.items()})
        values.update(get_device_capability=profile.capability, get_device_sm=facts["device_sm"])
    return {name: (lambda *_a, _v=value, **_k: _v) for name, value in values.items()}


@contextlib.contextmanager
def simulated_gpu(profile: GpuProfile) -> Iterator[None]:
    """Make SGLang believe it runs on ``profile``'s GPU: through ``override_platform`` where
    SGLang has it, else its probes rebound (exact-capability probes rebound on every release)."""
    try:
        from sglang.srt.runtime_context import _PLATFORM_PROBES, _PLATFORM_VALUES, override_platform
    except ImportError:
        with rebound_in_sglang(COMMON, _probe_fakes(profile, legacy=True)):
            yield
        return
    known = set(_PLATFORM_PROBES) | set(_PLATFORM_VALUES)
    facts = {k: v for k, v in profile.platform_facts().items() if k in known}
    with override_platform(**facts), rebound_in_sglang(COMMON, _probe_fakes(profile, legacy=False)):
        yield


def device_capability(profile: GpuProfile) -> contextlib.AbstractContextManager[None]:
    """Torch's compute capability is ``profile``'s (compressed-tensors asks torch directly)."""
    import torch

    return attribute(torch.cuda, "get_device_capability", lambda *_: profile.capability)
