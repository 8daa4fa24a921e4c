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
}
GEMMA4_NVFP4_MOE = EXAMPLES_DIR / "gemma-4-26b-a4b-nvfp4"
LLAMA4_NVFP4 = EXAMPLES_DIR / "llama-4-scout-17b-16e-nvfp4"
LLAMA4_NVFP4_CT = EXAMPLES_DIR / "llama-4-scout-17b-16e-nvfp4-compressed-tensors"
