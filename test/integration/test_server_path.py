"""Nothing heavy on the server path: a process that loads the plugin as SGLang does and then
imports what a scheduler imports holds neither the source reader nor the simulation. On a
tested release every fact comes from the release facts' row; the reader and the simulation
run in ``verify``, ``explain`` and CI, and where a release has no row."""

from __future__ import annotations

import json

import pytest

from support import SCRIPTS
from support.forkserver import run_python

PROBE = SCRIPTS / "server_path_probe.py"
HEAVY = ("sglang_nvfp4_patches.simulation",)


@pytest.mark.release_matrix
def test_a_server_imports_no_simulation() -> None:
    done = run_python([str(PROBE)], {"SGLANG_PLUGINS": "nvfp4_patches"}, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    found = json.loads(line[len("RESULT ") :])
    # the modules whose import callbacks decide (the MoE layer, ModelOpt's methods)
    assert {
        "sglang.srt.layers.moe.fused_moe_triton.layer",
        "sglang.srt.layers.quantization.modelopt_quant",
    } <= set(found["imported"]), found
    # the runner module, whose import callback decides the runner part, where the release has it
    runner = "sglang.srt.layers.moe.moe_runner.flashinfer_cutlass"
    assert runner in found["imported"] or found["failed"][runner].startswith(
        f"ModuleNotFoundError: No module named '{runner}'"
    ), found
    # the plugin was loaded, and its patches' modules are there: the probe can see them
    assert "sglang_nvfp4_patches.plugin" in found["ours"], found["ours"]
    assert "sglang_nvfp4_patches.llama4_router_weight.method_lift" in found["ours"]
    heavy = [name for name in found["ours"] if name.startswith(HEAVY)]
    assert heavy == [], heavy
