"""``nvfp4-moe-runner`` for launches across GPUs, on SGLang 0.5.23's own resolution and its
own fused-function registry: every operator launch of a ModelOpt NVFP4 MoE checkpoint with
TP, EP, attention DP or an all-to-all backend, on SM100 and SM120, either gets a runner SGLang
registers a fused function for with that backend, or is refused while its arguments resolve
(before any weight loads) naming ``--moe-a2a-backend none``; a layout CI has not shown logs
one WARNING; the operator's runner is never changed; ``explain`` gives each layout's fate."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from sglang_nvfp4_patches import fused_functions
from sglang_nvfp4_patches.errors import LaunchRefused
from sglang_nvfp4_patches.explain.run import patches_suspended as as_sglang_ships
from sglang_nvfp4_patches.simulation.bundled import LLAMA4_NVFP4, QWEN3_MOE_NVFP4
from sglang_nvfp4_patches.simulation.gpus import GPU_PROFILES
from sglang_nvfp4_patches.simulation.server_args import ServerArgsRejected, resolve
from support.forkserver import run_cli_once

EXAMPLES = Path(__file__).parents[2] / "examples"
MODELS = {
    "Qwen3-MoE": QWEN3_MOE_NVFP4,
    "Llama 4": LLAMA4_NVFP4,
    "DeepSeek-V3": EXAMPLES / "deepseek-v3-nvfp4",
}
LAYOUTS: dict[str, dict[str, Any]] = {
    "tp4 ep4": {"tp_size": 4, "ep_size": 4},
    "tp4 deepep": {"tp_size": 4, "ep_size": 4, "moe_a2a_backend": "deepep"},
    "tp4 mooncake": {"tp_size": 4, "moe_a2a_backend": "mooncake"},
    "tp4 attention DP": {"tp_size": 4, "attn_dp_size": 4},
}
CUTLASS = "flashinfer_cutlass"


def test_the_registry_is_sglangs_own() -> None:
    """What the unit tests take SGLang 0.5.23's registry to be, read from SGLang itself."""
    from sglang.srt.layers.moe.moe_runner.base import FusedOpPool

    assert fused_functions.runners_for("deepep") == ("flashinfer_cutedsl",)
    assert fused_functions.runners_for("mooncake") == ()
    assert CUTLASS in (fused_functions.runners_for("flashinfer") or ())
    assert fused_functions.registered("none", CUTLASS) is True
    assert fused_functions.registered("deepep", CUTLASS) is False
    assert FusedOpPool.get_fused_func("deepep", "flashinfer_cutedsl") is not None


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("gpu", ["sm100", "sm120"])
@pytest.mark.parametrize("name", MODELS)
def test_every_layout_gets_a_registered_runner_or_is_refused_naming_what_works(
    name: str, gpu: str, layout: str, caplog: pytest.LogCaptureFixture
) -> None:
    flags, profile = LAYOUTS[layout], GPU_PROFILES[gpu]
    a2a = flags.get("moe_a2a_backend", "none")
    with as_sglang_ships():
        own = resolve(MODELS[name], profile, **flags).moe_runner_backend
    caplog.set_level(logging.WARNING, logger="sglang_nvfp4_patches")
    try:
        published = resolve(MODELS[name], profile, **flags).moe_runner_backend
    except ServerArgsRejected as error:
        assert isinstance(error.__cause__, LaunchRefused), error
        message = str(error.__cause__)
        assert f"no fused function for --moe-a2a-backend {a2a}" in message
        assert "Launch it with --moe-a2a-backend none instead" in message
        assert message.endswith("refused before the weights load.")
        # the negative control: as SGLang ships, the runner its layer builds has none either
        assert own == "auto" or fused_functions.registered(a2a, own) is False
        return
    assert published in (own, CUTLASS)
    if published != "auto":
        assert fused_functions.registered(a2a, published), (published, a2a)
    warned = [r.getMessage() for r in caplog.records if "not for this layout" in r.getMessage()]
    if "attn_dp_size" in flags and published == CUTLASS and own == "auto":
        assert warned and "attention data parallelism not shown on CPU" in warned[0]
    if layout == "tp4 ep4":
        assert not warned  # shown across CPU ranks (the release facts' layouts)


def test_an_operators_runner_and_backend_are_never_changed() -> None:
    flags = {
        "tp_size": 4,
        "ep_size": 4,
        "moe_a2a_backend": "deepep",
        "deepep_mode": "low_latency",
        "quantization": "modelopt_fp4",
        "moe_runner_backend": "flashinfer_cutedsl",
    }
    for gpu in ("sm100", "sm120"):
        with as_sglang_ships():
            own = resolve(QWEN3_MOE_NVFP4, GPU_PROFILES[gpu], **flags)
        assert resolve(QWEN3_MOE_NVFP4, GPU_PROFILES[gpu], **flags) == own


def _row(*flags: str) -> dict[str, Any]:
    done = run_cli_once(
        "explain", "--model", str(MODELS["DeepSeek-V3"]), "--gpu", "sm120", "--json", *flags
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_explain_gives_each_layouts_fate() -> None:
    shown = _row("--tp-size", "8", "--ep-size", "8")
    assert shown["layout"] == "--tp-size 8 --ep-size 8" and shown["layout_fate"] == "as on one GPU"
    assert (shown["moe_runner_backend"], shown["moe_layer_runner"]) == (CUTLASS, CUTLASS)
    assert shown["moe_layer_fails"] is None and shown["launch_refused"] is None
    refused = _row("--tp-size", "8", "--moe-a2a-backend", "mooncake")
    assert refused["launch_refused"].startswith("[nvfp4-moe-runner]")
    assert "no fused function for --moe-a2a-backend mooncake" in refused["launch_refused"]
    assert refused["decided_by"] == "nvfp4-moe-runner"
    assert refused["unpatched_fails_at_warmup"].startswith("when it is built: ")
    unknown = _row("--tp-size", "4", "--attn-dp-size", "4")
    assert unknown["layout_fate"] == ("not shown: attention data parallelism not shown on CPU")
