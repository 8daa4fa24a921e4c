"""Run as a fork-server child: load plugins as SGLang does, import what a scheduler imports
(the MoE layer, ModelOpt's quantization, the FlashInfer CUTLASS runner where this release has
it, the model runner), then print our modules in ``sys.modules``: one ``RESULT`` line."""

from __future__ import annotations

import importlib
import json
import sys

SCHEDULER_IMPORTS = (
    "sglang.srt.layers.moe.fused_moe_triton.layer",
    "sglang.srt.layers.quantization.modelopt_quant",
    "sglang.srt.layers.moe.moe_runner.flashinfer_cutlass",
    "sglang.srt.model_executor.model_runner",
)


def main() -> None:
    from sglang.srt.plugins import load_plugins

    load_plugins()
    imported, failed = [], {}
    for name in SCHEDULER_IMPORTS:
        try:
            importlib.import_module(name)
        except Exception as error:  # a release without the runner module, or a GPU-only import
            failed[name] = f"{type(error).__name__}: {error}"
            continue
        imported.append(name)
    ours = sorted(m for m in sys.modules if m.split(".")[0] == "sglang_nvfp4_patches")
    print("RESULT " + json.dumps({"imported": imported, "failed": failed, "ours": ours}))


if __name__ == "__main__":
    main()
