"""The NVFP4 MoE methods that assert ``llama4-router-weight``'s flag away on their CUTLASS
branch, as data (pure: a leaf every module names them from)."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class RejectingMethod:
    """One NVFP4 MoE quantization method (a whole class, not a part of one) that asserts the
    flag away on its CUTLASS branch."""

    part: str  # key in the outcomes and doctor's reason
    label: str
    module: str
    cls: str
    checked_in: str  # the method whose source holds the assert

    @property
    def target(self) -> str:
        return f"{self.module}.{self.cls}.create_moe_runner"


MODELOPT = RejectingMethod(
    "modelopt",
    "ModelOpt NVFP4",
    "sglang.srt.layers.quantization.modelopt_quant",
    "ModelOptNvFp4FusedMoEMethod",
    "apply",
)
COMPRESSED_TENSORS = RejectingMethod(
    "compressed-tensors",
    "compressed-tensors NVFP4",
    "sglang.srt.layers.quantization.compressed_tensors.schemes.compressed_tensors_w4a4_nvfp4_moe",
    "CompressedTensorsW4A4Nvfp4MoE",
    "apply_weights",
)
REJECTING_METHODS: tuple[RejectingMethod, ...] = (MODELOPT, COMPRESSED_TENSORS)
