"""``nvfp4-moe-runner`` on the SGLang under test, for every ModelOpt NVFP4 MoE architecture at
hand (Llama 4, Gemma 4, Qwen3-MoE, Mixtral, DeepSeek-V3, GLM-4.5: the first four are the
evidence's stand-ins, the last two only read through their configs and SGLang's own
overrides), on every simulated Blackwell GPU, launched with no flags and with the model
cards' ``--quantization modelopt_fp4``.

Each launch either keeps what SGLang publishes itself (a model override's runner, or its
``modelopt_fp4`` rule on SM12x), or gets ``flashinfer_cutlass`` where SGLang's own layer fails,
and then the layer, built by SGLang's ``FusedMoE`` with its weights loaded and processed,
serves one forward. Negative controls: without the patches the same launch fails as SGLang
ships it, and given flags resolve as SGLang resolves them. ``--quantization modelopt``, which
SGLang's layer cannot serve on any runner here, is refused naming the line that works.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sglang_nvfp4_patches.explain.run import patches_suspended as as_sglang_ships
from sglang_nvfp4_patches.simulation.bundled import (
    GEMMA4_NVFP4_MOE,
    LLAMA4_NVFP4,
    MIXTRAL_NVFP4,
    QWEN3_MOE_NVFP4,
)
from sglang_nvfp4_patches.simulation.gpus import GPU_PROFILES, simulated_gpu
from sglang_nvfp4_patches.simulation.moe_forward import LayerVerdict, run_first_moe_layer
from sglang_nvfp4_patches.simulation.server_args import (
    ServerArgsRejected,
    quiet_sglang,
    resolve,
    resolved_server_args,
)
from support.release import MOE_RUNNER_MISMATCH, ships

pytestmark = pytest.mark.release_matrix
AFFECTED = ships(MOE_RUNNER_MISMATCH)
CUTLASS = "flashinfer_cutlass"
MOE_CONFIGS = Path(__file__).parents[2] / "examples"
MODELS = {
    "Llama 4": LLAMA4_NVFP4,
    "Gemma 4": GEMMA4_NVFP4_MOE,
    "Qwen3-MoE": QWEN3_MOE_NVFP4,
    "Mixtral": MIXTRAL_NVFP4,
    "DeepSeek-V3": MOE_CONFIGS / "deepseek-v3-nvfp4",
    "GLM-4.5": MOE_CONFIGS / "glm-4.5-air-nvfp4",
}
# SGLang reads the major alone (SM103 resolves as SM100, SM121 as SM120): every model on one
# of each, Llama 4 (no model override publishes its runner) on all four.
LAUNCHES = [
    *((name, gpu) for name in MODELS for gpu in ("sm100", "sm120")),
    ("Llama 4", "sm103"),
    ("Llama 4", "sm121"),
]
LINES = {"no flags": {}, "--quantization modelopt_fp4": {"quantization": "modelopt_fp4"}}
RANDOM = ("random_seed",)  # drawn at random for each record not given one


def resolved(model: Path, gpu: str, **flags: Any) -> dict[str, Any]:
    """Every field SGLang resolves (its resolved record where it has one)."""
    with quiet_sglang(), simulated_gpu(GPU_PROFILES[gpu]):
        server_args = resolved_server_args(model, **flags)
        if hasattr(server_args, "resolved_dict"):
            fields = dict(server_args.resolved_dict())
        else:
            plain = (str, int, float, bool, type(None), list, tuple, dict)
            fields = {
                k: v
                for k, v in vars(server_args).items()
                if not k.startswith("_") and isinstance(v, plain)
            }
    return {name: value for name, value in fields.items() if name not in RANDOM}


@pytest.mark.parametrize("line", LINES)
@pytest.mark.parametrize(("name", "gpu"), LAUNCHES)
def test_every_operator_launch_serves_or_is_sglangs_own(name: str, gpu: str, line: str) -> None:
    model, flags, profile = MODELS[name], LINES[line], GPU_PROFILES[gpu]
    with as_sglang_ships():
        own = resolve(model, profile, **flags).moe_runner_backend
        shipped = run_first_moe_layer(model, profile, flags)
    published = resolve(model, profile, **flags).moe_runner_backend
    assert shipped is not None
    if own != "auto" or not AFFECTED or not shipped.broken:
        assert published == own, (own, shipped)  # SGLang's choice, or nothing shown failing
        return
    # the negative control: as SGLang ships, this launch fails at the first forward
    assert shipped.runner == "flashinfer_trtllm" and shipped.verdict is LayerVerdict.FAILS
    assert "g1_scale_c" in shipped.detail or "Unsupported moe_runner_backend" in shipped.detail
    layer = run_first_moe_layer(model, profile, flags)
    assert published == CUTLASS
    assert layer is not None and (layer.runner, layer.verdict) == (CUTLASS, LayerVerdict.SERVES)
    meaning = "expert(x*w)" if name == "Llama 4" else "sum_k w_k*expert_k(x)"
    assert layer.detail.startswith(f"output = {meaning}"), layer.detail


@pytest.mark.skipif(not AFFECTED, reason=f"the patch acts from {MOE_RUNNER_MISMATCH} only")
@pytest.mark.parametrize("gpu", ["sm100", "sm120"])
def test_a_plain_launch_resolves_as_the_cutlass_flag_does(gpu: str) -> None:
    patched = resolved(QWEN3_MOE_NVFP4 if gpu == "sm120" else MIXTRAL_NVFP4, gpu)
    with as_sglang_ships():
        model = QWEN3_MOE_NVFP4 if gpu == "sm120" else MIXTRAL_NVFP4
        flagged = resolved(model, gpu, moe_runner_backend=CUTLASS)
    assert patched == flagged


@pytest.mark.skipif(not AFFECTED, reason=f"the patch acts from {MOE_RUNNER_MISMATCH} only")
@pytest.mark.parametrize("name", ["Llama 4", "Qwen3-MoE"])
def test_a_line_no_runner_serves_is_refused_naming_the_one_that_does(name: str) -> None:
    with as_sglang_ships():
        shipped = run_first_moe_layer(
            MODELS[name], GPU_PROFILES["sm120"], {"quantization": "modelopt"}
        )
    assert shipped is not None and shipped.verdict is LayerVerdict.FAILS  # SGLang's own fails
    with pytest.raises(ServerArgsRejected) as refused:
        resolve(MODELS[name], GPU_PROFILES["sm120"], quantization="modelopt")
    message = str(refused.value)
    assert "[nvfp4-moe-runner]" in message and "--quantization modelopt on SM120" in message
    assert "Launch it with --quantization modelopt_fp4 instead" in message


@pytest.mark.parametrize(
    "flags",
    [
        {"moe_runner_backend": "flashinfer_trtllm"},
        {"moe_runner_backend": CUTLASS},
        {"moe_runner_backend": CUTLASS, "quantization": "modelopt_fp4"},
    ],
)
@pytest.mark.parametrize("gpu", ["sm100", "sm120"])
def test_given_runners_resolve_exactly_as_sglang_resolves_them(
    flags: dict[str, str], gpu: str
) -> None:
    for model in (LLAMA4_NVFP4, QWEN3_MOE_NVFP4, MODELS["DeepSeek-V3"]):
        patched = resolved(model, gpu, **flags)
        with as_sglang_ships():
            assert patched == resolved(model, gpu, **flags)
