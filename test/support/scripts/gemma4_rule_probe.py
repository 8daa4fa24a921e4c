"""Run in a fresh interpreter: load plugins the way SGLang does, then ask SGLang to resolve
several Gemma 4 configurations on simulated GPUs and print what it picked.

``gemma4_rule_probe.py CASES_JSON`` where CASES_JSON is a list of
``{"model": DIR, "gpu": "sm100", "flags": {...}}``. Prints one line
``RESULT {"sglang", "mode", "state", "cases": [{"attention_backend", "warnings"}...]}``;
``warnings`` are this plugin's WARNING messages logged while that case resolved, but for the
MoE runner patch's (its own launch lines: a GeGLU NVFP4 MoE layer no runner serves on 0.5.12
says so there). Nothing here replaces SGLang code: the environment (FORCE, DISABLE,
PYTHONPATH) is the scenario.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

BACKEND_MODULE = "sglang.srt.layers.attention.trtllm_mha_backend"
MOE_RUNNER_LOGGER = "sglang_nvfp4_patches.nvfp4_moe_runner"


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if not record.name.startswith(MOE_RUNNER_LOGGER):
            self.messages.append(record.getMessage())


def resolved_attention(model: str, gpu: str, flags: dict[str, Any]) -> str | None:
    from sglang_nvfp4_patches.simulation.gpus import GPU_PROFILES, simulated_gpu
    from sglang_nvfp4_patches.simulation.server_args import resolved_server_args

    with simulated_gpu(GPU_PROFILES[gpu]):
        server_args = resolved_server_args(Path(model), **flags)
        if hasattr(server_args, "resolved_dict"):  # 0.5.20+; older resolve in place
            return server_args.resolved_dict()["attention_backend"]
        return server_args.attention_backend


def main() -> None:
    cases = json.loads(sys.argv[1])
    logging.basicConfig(level=logging.WARNING)
    collect = _Collect()
    logging.getLogger("sglang_nvfp4_patches").addHandler(collect)

    from sglang.srt.plugins import load_plugins

    already = set(sys.modules)
    load_plugins()
    # The root-cause probe reads the backend's source; loading must import neither it nor
    # FlashInfer (a forked probe may have FlashInfer already: only what loading added counts).
    imported = sorted(
        m for m in ("flashinfer", BACKEND_MODULE) if m in sys.modules and m not in already
    )

    from sglang_nvfp4_patches.gemma4_attention.rule_state import current_mode
    from sglang_nvfp4_patches.supported_releases import sglang_version
    from sglang_nvfp4_patches.this_process import reports

    load_messages, collect.messages = collect.messages, []
    results = []
    for case in cases:
        try:
            attention = resolved_attention(case["model"], case["gpu"], case.get("flags", {}))
        except ValueError as rejected:  # SGLang's own refusal, compared with its unpatched one
            attention = f"ValueError: {rejected}"
        results.append({"attention_backend": attention, "warnings": collect.messages})
        collect.messages = []
    mode = current_mode()
    report = reports().get("gemma4-attention")
    print(
        "RESULT "
        + json.dumps(
            {
                "sglang": sglang_version(),
                "mode": None if mode is None else mode.value,
                "state": None if report is None else report.as_dict(),
                "load_warnings": load_messages,
                "imported_at_load": imported,
                "cases": results,
            }
        )
    )


if __name__ == "__main__":
    main()
