"""The GPUs ``explain`` can simulate, as the facts SGLang asks about (pure: no SGLang import)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GpuProfile:
    name: str
    label: str
    capability: tuple[int, int]

    @property
    def major(self) -> int:
        return self.capability[0]

    def platform_facts(self) -> dict[str, object]:
        """Yes/no facts as SGLang derives them from the capability (CUDA >= 12.8 assumed)."""
        major = self.major
        return {
            "is_cuda": True,
            "is_hip": False,
            "is_npu": False,
            "is_xpu": False,
            "is_musa": False,
            "is_mps": False,
            "is_sm90": major == 9,
            "is_sm100": major == 10,
            "is_sm100_or_sm110": major in (10, 11),
            "is_sm110": major == 11,
            "is_sm120": major == 12,
            "is_blackwell": major in (10, 11, 12),
            "is_hopper_with_cuda_12_3": major == 9,
            "has_amx": False,
            "has_flashinfer": True,
            "device_capability": self.capability,
            "device_sm": major * 10 + self.capability[1],
        }


GPU_PROFILES: dict[str, GpuProfile] = {
    profile.name: profile
    for profile in (
        GpuProfile("sm90", "H100/H200 (SM90)", (9, 0)),
        GpuProfile("sm100", "B200 (SM100)", (10, 0)),
        GpuProfile("sm103", "GB300 (SM103)", (10, 3)),
        GpuProfile("sm120", "RTX PRO 6000 (SM120)", (12, 0)),
    )
}
