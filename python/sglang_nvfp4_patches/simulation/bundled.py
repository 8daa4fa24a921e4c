"""The stand-in checkpoint configs shipped with the package (hand-written ``config.json``
files with the fields those checkpoints publish), and the checkpoint each stands for."""

from __future__ import annotations

from pathlib import Path

EXAMPLES_DIR = Path(__file__).parents[1] / "example_configs"
BUNDLED_MODELS: dict[str, str] = {
    "gemma-4-26b-a4b-nvfp4": "nvidia/Gemma-4-26B-A4B-NVFP4",
    "gemma-4-26b-a4b-it": "google/gemma-4-26B-A4B-it",
    "gemma-4-31b-it-nvfp4": "nvidia/Gemma-4-31B-IT-NVFP4",
    "llama-4-scout-17b-16e-nvfp4": "nvidia/Llama-4-Scout-17B-16E-Instruct-FP4",
    "llama-4-scout-17b-16e-nvfp4-compressed-tensors": (
        "RedHatAI/Llama-4-Scout-17B-16E-Instruct-NVFP4"
    ),
    "qwen3-30b-a3b-nvfp4": "nvidia/Qwen3-30B-A3B-FP4",
}
GEMMA4_NVFP4_MOE = EXAMPLES_DIR / "gemma-4-26b-a4b-nvfp4"
LLAMA4_NVFP4 = EXAMPLES_DIR / "llama-4-scout-17b-16e-nvfp4"
LLAMA4_NVFP4_CT = EXAMPLES_DIR / "llama-4-scout-17b-16e-nvfp4-compressed-tensors"
QWEN3_MOE_NVFP4 = EXAMPLES_DIR / "qwen3-30b-a3b-nvfp4"
# The evidence's control: a SwiGLU top-2 MoE no SGLang model override concerns.
MIXTRAL_NVFP4 = EXAMPLES_DIR / "mixtral-8x7b-nvfp4"
EVIDENCE_CONTROL = MIXTRAL_NVFP4
# The ModelOpt NVFP4 MoE stand-ins the MoE runner evidence runs, by what each stands for.
EVIDENCE_STAND_INS: dict[str, Path] = {
    BUNDLED_MODELS[LLAMA4_NVFP4.name]: LLAMA4_NVFP4,
    BUNDLED_MODELS[GEMMA4_NVFP4_MOE.name]: GEMMA4_NVFP4_MOE,
    BUNDLED_MODELS[QWEN3_MOE_NVFP4.name]: QWEN3_MOE_NVFP4,
    "a ModelOpt NVFP4 Mixtral-8x7B": MIXTRAL_NVFP4,
}
