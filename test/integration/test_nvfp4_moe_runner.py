"""``nvfp4-moe-runner`` on the SGLang under test: a plain launch (no ``--quantization``, no
``--moe-runner-backend``) of the bundled ModelOpt NVFP4 Llama 4 and Gemma 4 MoE configs on a
simulated RTX PRO 6000 (SM120) or DGX Spark (SM121), both quantization formats.

Where SGLang's own layer fails there (``MOE_RUNNER_MISMATCH`` on: each release's code read),
the published runner is ``flashinfer_cutlass`` and the layer, built by SGLang's ``FusedMoE``
with its weights loaded and processed, serves one forward (Llama 4: ``expert(x * w)``);
without the patches the same launch fails as SGLang ships it; and the launch resolves exactly
as ``--moe-runner-backend flashinfer_cutlass`` does. Given flags are SGLang's, field for field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sglang_nvfp4_patches.explain.run import patches_suspended as as_sglang_ships
from sglang_nvfp4_patches.simulation.gpus import GPU_PROFILES, simulated_gpu
from sglang_nvfp4_patches.simulation.moe_forward import LayerVerdict, run_first_moe_layer
from sglang_nvfp4_patches.simulation.server_args import quiet_sglang, resolve, resolved_server_args
from support.configs import GEMMA4_NVFP4_MOE, LLAMA4_NVFP4, hf_quant_copy
from support.release import MOE_RUNNER_MISMATCH, ships

pytestmark = pytest.mark.release_matrix
AFFECTED = ships(MOE_RUNNER_MISMATCH)
CUTLASS = "flashinfer_cutlass"
MODELS = {"Llama 4": LLAMA4_NVFP4, "Gemma 4": GEMMA4_NVFP4_MOE}
LAUNCHES = [(family, gpu) for family in MODELS for gpu in ("sm120", "sm121")]


@pytest.fixture(scope="module", params=["config.json", "hf_quant_config.json"])
def checkpoints(request: pytest.FixtureRequest, tmp_path_factory: Any) -> dict[str, Path]:
    if request.param == "config.json":
        return MODELS
    return {
        family: hf_quant_copy(model, tmp_path_factory.mktemp(family.replace(" ", "")))
        for family, model in MODELS.items()
    }


# Drawn at random for each record that is not given one: not a resolution.
RANDOM = ("random_seed",)
PLAIN = (str, int, float, bool, type(None), list, tuple, dict)


def resolved(model: Path, gpu: str, **flags: Any) -> dict[str, Any]:
    """Every field SGLang resolves (its resolved record where it has one)."""
    with quiet_sglang(), simulated_gpu(GPU_PROFILES[gpu]):
        server_args = resolved_server_args(model, **flags)
        if hasattr(server_args, "resolved_dict"):
            fields = dict(server_args.resolved_dict())
        else:  # the record resolved in place, objects it built (a ModelConfig) left out
            fields = {
                k: v
                for k, v in vars(server_args).items()
                if not k.startswith("_") and isinstance(v, PLAIN)
            }
    return {name: value for name, value in fields.items() if name not in RANDOM}


def test_sglang_detects_modelopt_fp4_from_either_file(checkpoints: dict[str, Path]) -> None:
    for model in checkpoints.values():
        assert resolve(model, GPU_PROFILES["sm120"]).quantization in (None, "modelopt_fp4")
        with as_sglang_ships():
            assert resolve(model, GPU_PROFILES["sm120"]).moe_runner_backend == "auto"


@pytest.mark.parametrize(("family", "gpu"), LAUNCHES)
def test_a_plain_launch_gets_a_runner_its_layer_serves(
    checkpoints: dict[str, Path], family: str, gpu: str
) -> None:
    model = checkpoints[family]
    published = resolve(model, GPU_PROFILES[gpu]).moe_runner_backend
    layer = run_first_moe_layer(model, GPU_PROFILES[gpu])
    assert layer is not None and layer.family == family
    if not AFFECTED:  # nothing shown failing here: SGLang's own answer stands
        assert published == "auto", published
        assert layer.verdict is not LayerVerdict.SERVES or layer.runner != CUTLASS
        return
    assert published == CUTLASS
    assert (layer.runner, layer.verdict) == (CUTLASS, LayerVerdict.SERVES), layer.detail
    meaning = "expert(x*w)" if family == "Llama 4" else "sum_k w_k*expert_k(x)"
    assert layer.detail.startswith(f"output = {meaning}")


@pytest.mark.skipif(not AFFECTED, reason=f"no plain launch fails before {MOE_RUNNER_MISMATCH}")
@pytest.mark.parametrize(("family", "gpu"), LAUNCHES)
def test_without_the_patches_the_plain_launch_fails_as_sglang_ships(
    checkpoints: dict[str, Path], family: str, gpu: str
) -> None:
    with as_sglang_ships():
        layer = run_first_moe_layer(checkpoints[family], GPU_PROFILES[gpu])
    assert layer is not None and layer.runner == "flashinfer_trtllm"
    assert layer.verdict is LayerVerdict.FAILS
    assert layer.detail.startswith("at the first forward: ")
    assert "g1_scale_c" in layer.detail or "Unsupported moe_runner_backend" in layer.detail


@pytest.mark.skipif(not AFFECTED, reason=f"the patch acts from {MOE_RUNNER_MISMATCH} only")
@pytest.mark.parametrize(("family", "gpu"), [*LAUNCHES, ("Llama 4", "sm100"), ("Llama 4", "sm103")])
def test_the_plain_launch_resolves_as_the_cutlass_flag_does(family: str, gpu: str) -> None:
    patched = resolved(MODELS[family], gpu)
    with as_sglang_ships():
        flagged = resolved(MODELS[family], gpu, moe_runner_backend=CUTLASS)
    assert patched == flagged


@pytest.mark.parametrize(
    "flags",
    [
        {"moe_runner_backend": "flashinfer_trtllm"},
        {"moe_runner_backend": CUTLASS},
        {"moe_runner_backend": "auto", "quantization": "modelopt_fp4"},
    ],
)
@pytest.mark.parametrize("gpu", ["sm100", "sm120"])  # SM121 resolves as SM120 (major 12)
def test_given_flags_resolve_exactly_as_sglang_resolves_them(
    flags: dict[str, str], gpu: str
) -> None:
    for model in MODELS.values():
        patched = resolved(model, gpu, **flags)
        with as_sglang_ships():
            assert patched == resolved(model, gpu, **flags)
