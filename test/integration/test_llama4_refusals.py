"""Llama 4's router weight on the CUTLASS runner: what cannot be made exact is refused when
the MoE layer is built, naming the switch that fixes it; the main path is lifted once.

Each case resolves SGLang's real ``ServerArgs`` for the bundled Llama 4 NVFP4 stand-ins on a
simulated SM120, publishes them and SGLang's MoE settings as a scheduler does, and has the
real quant method build the layer's runner (``create_moe_runner``, as ``FusedMoE`` calls it
after creating weights and before loading them). Llama 4 builds ``FusedMoE`` without
``top_k``, so the runner configs here carry ``top_k=None`` as SGLang's do.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
import json
import pickle
from pathlib import Path
from typing import Any

import pytest

from sglang_nvfp4_patches.llama4_router_weight.refusals import (
    RouterWeightOnInputError,
    TopKNotOneError,
    UnverifiedWrapperError,
)
from sglang_nvfp4_patches.llama4_router_weight.rule import COMPRESSED_TENSORS, MODELOPT
from sglang_nvfp4_patches.simulation.llama4_layers import fused_moe_layer
from sglang_nvfp4_patches.simulation.moe_models import LLAMA4_EXPERTS
from sglang_nvfp4_patches.simulation.scheduler import moe_layer_build_on
from support.configs import LLAMA4_NVFP4, LLAMA4_NVFP4_CT, edited_copy
from support.release import recorded_llama4_state
from support.sglang_cpu import (
    a2a_dispatch_switch,
    llama4_runner_config,
    needs_runner_module,
)

pytestmark = [pytest.mark.release_matrix, needs_runner_module()]
HIDDEN, INTERMEDIATE, EXPERTS = 64, 64, 4
DP_ATTENTION_EP = {"tp_size": 2, "dp_size": 2, "enable_dp_attention": True, "ep_size": 2}
MODELOPT_FLAGS = {"quantization": "modelopt_fp4", "moe_runner_backend": "flashinfer_cutlass"}
TOP_K_REMEDY = "top-k must be 1 on this runner; use another MoE runner backend"
PER_TOKEN_ENV = "SGLANG_FLASHINFER_NVFP4_PER_TOKEN_ACTIVATION"


def modelopt_layer() -> tuple[Any, Any, Any]:
    """A Llama 4 MoE layer, its ModelOpt NVFP4 method (the layer's own) and runner config."""
    modelopt = importlib.import_module(MODELOPT.module)
    quant_config = modelopt.ModelOptFp4Config.from_config(
        {"quantization": {"quant_algo": "NVFP4", "group_size": 16, "exclude_modules": []}}
    )
    layer = fused_moe_layer(EXPERTS, INTERMEDIATE)
    layer.quant_method = modelopt.ModelOptNvFp4FusedMoEMethod(quant_config)
    config = llama4_runner_config(EXPERTS, HIDDEN, INTERMEDIATE, top_k=None, layer=layer)
    return layer, layer.quant_method, config


def compressed_tensors_layer() -> tuple[Any, Any, Any]:
    """The same from the compressed-tensors stand-in; the scheme is what SGLang lifts."""
    from sglang.srt.layers.quantization.compressed_tensors.compressed_tensors import (
        CompressedTensorsConfig,
    )

    config = json.loads((LLAMA4_NVFP4_CT / "config.json").read_text())
    quant_config = CompressedTensorsConfig.from_config(config["quantization_config"])
    layer = fused_moe_layer(EXPERTS, INTERMEDIATE)
    layer.quant_method = quant_config.get_quant_method(layer, prefix=LLAMA4_EXPERTS)
    if recorded_llama4_state(COMPRESSED_TENSORS.part) in ("upstream", "other runner"):
        pytest.skip(  # 0.5.15.post1: the scheme has no CUTLASS branch, so nothing to lift
            "not applicable: the record shows this SGLang's compressed-tensors NVFP4 MoE scheme "
            "not rejecting the flag"
        )
    runner_config = llama4_runner_config(EXPERTS, HIDDEN, INTERMEDIATE, top_k=None, layer=layer)
    return layer, layer.quant_method, runner_config


def lifted_method(layer: Any) -> Any:
    """The NVFP4 method whose rejection the plugin lifts: the compressed-tensors scheme, else
    the layer's own quant method."""
    return getattr(layer, "scheme", None) or layer.quant_method


def build(layer: Any, config: Any) -> None:
    """What FusedMoE does once the layer's weights exist."""
    layer.quant_method.create_moe_runner(layer, config)


def refusal(build_layer: Any, model: Path, **flags: Any) -> str:
    with moe_layer_build_on("sm120", model, **flags):
        layer, _, config = build_layer()
        with pytest.raises(RouterWeightOnInputError) as refused:
            build(layer, config)
    return str(refused.value)


def assert_lifted(layer: Any, method: Any, config: Any) -> None:
    """Built: the method's own check sees no flag; the runner keeps the layer's real config."""
    build(layer, config)
    assert method.runner.config is config and config.apply_router_weight_on_input
    assert method.runner.runner_backend.is_flashinfer_cutlass()
    assert not method.moe_runner_config.apply_router_weight_on_input


def test_main_path_is_lifted() -> None:
    with moe_layer_build_on("sm120", LLAMA4_NVFP4, **MODELOPT_FLAGS):
        layer, method, config = modelopt_layer()
        assert_lifted(layer, method, config)


def test_fp4_allgather_is_refused_at_build_naming_its_switch() -> None:
    flags = {**MODELOPT_FLAGS, **DP_ATTENTION_EP}
    message = refusal(modelopt_layer, LLAMA4_NVFP4, **flags)
    assert "quantize" in message and "--disable-flashinfer-cutlass-moe-fp4-allgather" in message
    with moe_layer_build_on(  # the switch it names does fix it
        "sm120",
        LLAMA4_NVFP4,
        **flags,
        disable_flashinfer_cutlass_moe_fp4_allgather=True,
    ):
        assert_lifted(*modelopt_layer())


def test_nvfp4_all_to_all_dispatch_is_refused_at_build_naming_its_switch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    modelopt = importlib.import_module(MODELOPT.module)
    if not hasattr(modelopt, "_use_nvfp4_dispatch"):
        # Before 0.5.20 the module reads SGLANG_MOE_NVFP4_DISPATCH once, at import, after
        # resolution turned it on for the FlashInfer all-to-all (a server imports it later).
        monkeypatch.setattr(modelopt, "MOE_NVFP4_DISPATCH", True)
    flags = {**MODELOPT_FLAGS, **DP_ATTENTION_EP, "moe_a2a_backend": "flashinfer"}
    message = refusal(modelopt_layer, LLAMA4_NVFP4, **flags)
    switch = a2a_dispatch_switch()
    assert "all-to-all" in message and switch in message
    assert "fp4-allgather" not in message
    if switch.startswith(
        "--"
    ):  # the switch it names does fix it (SGLang refuses the variable beside it)
        with moe_layer_build_on(
            "sm120", LLAMA4_NVFP4, **flags, flashinfer_a2a_dispatch_type="bf16"
        ):
            assert_lifted(*modelopt_layer())


@pytest.mark.parametrize("build_layer", [modelopt_layer, compressed_tensors_layer])
def test_top_k_above_one_from_the_model_config_is_refused_at_build(
    build_layer: Any, tmp_path: Path
) -> None:
    source = LLAMA4_NVFP4 if build_layer is modelopt_layer else LLAMA4_NVFP4_CT
    model = edited_copy(source, tmp_path / "top2", num_experts_per_tok=2)
    flags = MODELOPT_FLAGS if build_layer is modelopt_layer else {}
    with moe_layer_build_on("sm120", model, **flags):
        layer, _, config = build_layer()
        assert config.top_k is None  # as Llama 4 builds FusedMoE
        with pytest.raises(TopKNotOneError, match=TOP_K_REMEDY):
            build(layer, config)


class ForwardingWrapper:
    """A method wrapper as a vendor might add one: forwards the build to the inner method."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def create_moe_runner(self, layer: Any, config: Any) -> None:
        self.inner.create_moe_runner(layer, config)


def kt_ep_wrapper(inner: Any) -> Any:
    """SGLang's hybrid CPU/GPU experts wrapper around ``inner`` (its constructor needs the
    ktransformers kernels; building the runner does not)."""
    from sglang.srt.layers.moe.kt_ep_wrapper import KTEPWrapperMethod

    wrapper = object.__new__(KTEPWrapperMethod)
    wrapper.gpu_method, wrapper.override_num_local_experts = inner, False
    return wrapper


@pytest.mark.parametrize("wrap", [kt_ep_wrapper, ForwardingWrapper])
@pytest.mark.parametrize("build_layer", [modelopt_layer, compressed_tensors_layer])
def test_a_wrapped_method_is_refused_at_build_naming_the_wrapper(
    wrap: Any, build_layer: Any
) -> None:
    source = LLAMA4_NVFP4 if build_layer is modelopt_layer else LLAMA4_NVFP4_CT
    flags = MODELOPT_FLAGS if build_layer is modelopt_layer else {}
    with moe_layer_build_on("sm120", source, **flags):
        layer, _, config = build_layer()
        layer.quant_method = wrap(layer.quant_method)
        with pytest.raises(RouterWeightOnInputError) as refused:
            build(layer, config)
    name = type(layer.quant_method).__name__
    assert f"wrapped by {name}" in str(refused.value)
    if name == "KTEPWrapperMethod":
        assert "--kt-weight-path" in str(refused.value)


def test_a_compressed_tensors_layer_holding_another_scheme_is_refused() -> None:
    """The layer's own compressed-tensors method, but ``layer.scheme`` is not the NVFP4 scheme
    being built (a scheme in front of it): refused, not lifted."""
    with moe_layer_build_on("sm120", LLAMA4_NVFP4_CT):
        layer, method, config = compressed_tensors_layer()
        nvfp4_scheme = layer.scheme
        layer.scheme = ForwardingWrapper(nvfp4_scheme)
        with pytest.raises(UnverifiedWrapperError) as refused:
            build(layer, config)
    assert type(method).__name__ == "CompressedTensorsFusedMoEMethod"
    message = str(refused.value)
    assert (
        f"this MoE layer's {type(nvfp4_scheme).__name__} is wrapped by {type(method).__name__}"
        in message
    )
    assert f"only for an unwrapped {type(nvfp4_scheme).__name__}" in message
    assert nvfp4_scheme.moe_runner_config is config  # SGLang's own view: the flag stands


@pytest.mark.parametrize("build_layer", [modelopt_layer, compressed_tensors_layer])
def test_a_layer_without_a_quant_method_is_refused_as_an_unknown_holder(build_layer: Any) -> None:
    source = LLAMA4_NVFP4 if build_layer is modelopt_layer else LLAMA4_NVFP4_CT
    flags = MODELOPT_FLAGS if build_layer is modelopt_layer else {}
    with moe_layer_build_on("sm120", source, **flags):
        layer, _, config = build_layer()
        nvfp4_method = lifted_method(layer)
        del layer.quant_method
        with pytest.raises(UnverifiedWrapperError) as refused:
            nvfp4_method.create_moe_runner(layer, config)
    message = str(refused.value)
    name = type(nvfp4_method).__name__
    assert f"this MoE layer's {name} is wrapped by an unknown holder (no quant_method)" in message
    assert nvfp4_method.moe_runner_config is config


# Llama 4 on a simulated B200 with the FlashInfer TRT-LLM MoE runner: SGLang's ModelOpt default
# there (``auto``, as SGLang resolves it), or asked for; the compressed-tensors scheme builds it
# when asked.
OTHER_RUNNERS = [
    pytest.param(
        modelopt_layer, LLAMA4_NVFP4, {"quantization": "modelopt_fp4"}, id="modelopt-auto"
    ),
    pytest.param(
        modelopt_layer,
        LLAMA4_NVFP4,
        {"quantization": "modelopt_fp4", "moe_runner_backend": "flashinfer_trtllm"},
        id="modelopt-flashinfer_trtllm",
    ),
    pytest.param(
        compressed_tensors_layer,
        LLAMA4_NVFP4_CT,
        {"moe_runner_backend": "flashinfer_trtllm"},
        id="compressed-tensors-flashinfer_trtllm",
    ),
]


@pytest.mark.parametrize(("build_layer", "source", "flags"), OTHER_RUNNERS)
def test_a_method_on_another_runner_keeps_sglangs_own_view_of_the_flag(
    build_layer: Any, source: Path, flags: dict[str, Any]
) -> None:
    """The lift is for the CUTLASS runner only: elsewhere the method builds what SGLang's own
    create_moe_runner builds, and reads the layer's real config, flag and all (the runner
    left at auto as SGLang resolves it: nvfp4-moe-runner, which would publish CUTLASS for the
    model cards' line on SM100, suspended)."""
    from sglang_nvfp4_patches.nvfp4_moe_runner.suspension import suspended

    with suspended(), moe_layer_build_on("sm100", source, **flags):
        layer, _, config = build_layer()
        build(layer, config)
        twin_layer, _, twin_config = build_layer()
        twin = lifted_method(twin_layer)
        type(twin).create_moe_runner.__wrapped__(twin, twin_layer, twin_config)  # SGLang's own
    method = lifted_method(layer)
    assert method.runner.runner_backend is twin.runner.runner_backend
    assert not method.runner.runner_backend.is_flashinfer_cutlass()
    assert method.runner.config is config and twin.moe_runner_config is twin_config
    assert method.moe_runner_config is config
    assert method.moe_runner_config.apply_router_weight_on_input is True


def test_per_token_activations_are_not_quantized_by_the_all_to_all_and_build(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SGLang's FlashInfer all-to-all dispatches NVFP4 only without per-token activation
    scales; with them (SGLang's own switch) the layer is lifted, not refused."""
    from sglang.srt.environ import envs

    if not hasattr(envs, PER_TOKEN_ENV):
        pytest.skip(f"not applicable: this SGLang has no {PER_TOKEN_ENV}")
    monkeypatch.setenv(PER_TOKEN_ENV, "1")
    flags = {**MODELOPT_FLAGS, **DP_ATTENTION_EP, "moe_a2a_backend": "flashinfer"}
    with moe_layer_build_on("sm120", LLAMA4_NVFP4, **flags):
        layer, method, config = modelopt_layer()
        assert method.quant_config.use_per_token_activation is True
        assert_lifted(layer, method, config)


def test_compressed_tensors_main_path_is_lifted() -> None:
    if recorded_llama4_state(COMPRESSED_TENSORS.part) == "lifted, wrong":
        pytest.skip(
            "not applicable: the record shows the lifted layer computing wrong here, so it is "
            "refused (test_llama4_compressed_tensors_method.py)"
        )
    with moe_layer_build_on("sm120", LLAMA4_NVFP4_CT):
        layer, method, config = compressed_tensors_layer()
        assert_lifted(layer, layer.scheme, config)
        assert method is layer.quant_method


@pytest.mark.parametrize(
    "remake",
    [
        copy.copy,
        copy.deepcopy,
        lambda view: pickle.loads(pickle.dumps(view)),
        dataclasses.replace,
        lambda view: dataclasses.replace(view, top_k=1),
    ],
    ids=["copy", "deepcopy", "pickle", "replace", "replace-a-field"],
)
def test_configs_made_from_the_view_carry_the_real_flag(remake: Any) -> None:
    from sglang.srt.layers.moe.moe_runner.base import MoeRunnerConfig

    with moe_layer_build_on("sm120", LLAMA4_NVFP4, **MODELOPT_FLAGS):
        layer, method, config = modelopt_layer()
        build(layer, config)
    config.layer = None  # a module holding process-wide state does not pickle
    made = remake(method.moe_runner_config)
    assert type(made) is MoeRunnerConfig and made is not config
    assert made.apply_router_weight_on_input is True
    assert not method.moe_runner_config.apply_router_weight_on_input
