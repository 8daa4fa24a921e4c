"""Config directories for tests: the bundled stand-ins, or edited copies of them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sglang_nvfp4_patches.simulation.bundled import (
    EXAMPLES_DIR,
    GEMMA4_NVFP4_MOE,
    LLAMA4_NVFP4,
    LLAMA4_NVFP4_CT,
)

__all__ = ["GEMMA4_NVFP4_MOE", "LLAMA4_NVFP4", "LLAMA4_NVFP4_CT"]

EXAMPLES = EXAMPLES_DIR
GEMMA4_BF16_MOE = EXAMPLES / "gemma-4-26b-a4b-it"
GEMMA4_NVFP4_DENSE = EXAMPLES / "gemma-4-31b-it-nvfp4"
ALL_BUNDLED = (GEMMA4_NVFP4_MOE, GEMMA4_BF16_MOE, GEMMA4_NVFP4_DENSE, LLAMA4_NVFP4)

_MISSING = object()


def edited_copy(source: Path, target: Path, **text_config: Any) -> Path:
    """Copy ``source``'s config.json into ``target`` with text_config keys set (or removed
    when the value is ``edited_copy.REMOVE``)."""
    config = json.loads((source / "config.json").read_text())
    for key, value in text_config.items():
        if value is REMOVE:
            config["text_config"].pop(key, None)
        else:
            config["text_config"][key] = value
    target.mkdir(parents=True, exist_ok=True)
    (target / "config.json").write_text(json.dumps(config))
    return target


REMOVE = _MISSING


def hf_quant_copy(source: Path, target: Path) -> Path:
    """Copy ``source``'s ModelOpt checkpoint config with its quantization moved out of
    config.json into ``hf_quant_config.json`` beside it, as ModelOpt exports it."""
    config = json.loads((source / "config.json").read_text())
    quantization = config.pop("quantization_config")
    quantization.pop("quant_method", None)
    target.mkdir(parents=True, exist_ok=True)
    (target / "config.json").write_text(json.dumps(config))
    exported = {"producer": {"name": "modelopt"}, "quantization": quantization}
    (target / "hf_quant_config.json").write_text(json.dumps(exported))
    return target
