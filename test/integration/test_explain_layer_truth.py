"""The simulated MoE layer is the checkpoint's own (issue 58): built at its first MoE layer's
index (a dense layer before it, and the ignore patterns that touch only that layer, change
nothing), with its own quantization format (a format the CPU cannot load says unknown, never
a failure the simulation caused); a runner the operator names gets the fate the same runner
gets with no flag; ``(unknown)`` says how far the layer got; a dense checkpoint says the
patches do not act on it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sglang_nvfp4_patches.simulation.bundled import QWEN3_MOE_NVFP4
from support.forkserver import json_lines, server

DEEPSEEK_V3 = Path(__file__).parents[2] / "examples" / "deepseek-v3-nvfp4"
KIMI_IGNORE = ["lm_head", "model.layers.0*", "*self_attn*", "*mlp.gate"]
NVFP4 = {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16}
# Nemotron-H's fields (over a Qwen3-MoE config's): its experts' relu2, built without a gate
NEMOTRON_H = {
    "architectures": ["NemotronHForCausalLM"],
    "model_type": "nemotron_h",
    "num_experts": None,
    "n_routed_experts": 8,
    "hybrid_override_pattern": "M-M*EM",
    "num_hidden_layers": 6,
    "mlp_hidden_act": "relu2",
}


def _written(root: Path, name: str, source: Path, **fields: Any) -> str:
    config = json.loads((source / "config.json").read_text())
    config.update(fields)
    (root / name).mkdir()
    (root / name / "config.json").write_text(json.dumps(config))
    return str(root / name)


@pytest.fixture(scope="module")
def rows(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Each case's ``explain --json`` row; every process starts at once."""
    root = tmp_path_factory.mktemp("truth")
    kimi = {"first_k_dense_replace": 1, "moe_layer_freq": 1}
    dense = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "num_local_experts": None,
        "num_experts": None,
        "num_experts_per_tok": None,
    }
    models = {
        "layer 0 ignored": _written(
            root, "k1", DEEPSEEK_V3, **kimi, quantization_config={**NVFP4, "ignore": KIMI_IGNORE}
        ),
        "lm_head ignored": _written(
            root, "k2", DEEPSEEK_V3, **kimi, quantization_config={**NVFP4, "ignore": ["lm_head"]}
        ),
        "first MoE layer ignored": _written(
            root,
            "k3",
            DEEPSEEK_V3,
            **kimi,
            quantization_config={**NVFP4, "ignore": ["lm_head", "model.layers.1.mlp*"]},
        ),
        "ModelOpt FP8": _written(
            root,
            "fp8",
            QWEN3_MOE_NVFP4,
            quantization_config={"quant_method": "modelopt", "quant_algo": "FP8"},
        ),
        "dense": _written(root, "dense", QWEN3_MOE_NVFP4, **dense),
        "Nemotron-H": _written(root, "nemotron", QWEN3_MOE_NVFP4, **NEMOTRON_H),
    }
    cases: dict[str, tuple[str, ...]] = {
        name: ("--model", path, "--gpu", "dgx-spark") for name, path in models.items()
    }
    for gpu in ("sm100", "sm120"):
        for flag in ((), ("--moe-runner-backend", "flashinfer_trtllm")):
            name = f"{gpu}{' named' if flag else ''}"
            cases[name] = ("--no-patches", "--model", str(QWEN3_MOE_NVFP4), "--gpu", gpu, *flag)
    fork = server().zygote()
    started = {
        name: fork.start(["-m", "sglang_nvfp4_patches", "explain", "--json", *args], {})
        for name, args in cases.items()
    }
    done = {name: child.wait(timeout=300) for name, child in started.items()}
    for name, result in done.items():
        assert result.returncode == 0, (name, result.stderr[-3000:])
    return {name: json_lines(result.stdout)[0] for name, result in done.items()}


def _fate(row: dict[str, Any]) -> str:
    if row["moe_layer_fails"]:
        return "fails"
    return "unknown" if "fate is unknown" in row["note"] else "serves"


def test_a_dense_first_layer_and_its_ignore_pattern_change_nothing(
    rows: dict[str, dict[str, Any]],
) -> None:
    """Once the simulator built layer 0, which the ignore list leaves in BF16: "(fails)"."""
    ignored, plain = rows["layer 0 ignored"], rows["lm_head ignored"]
    assert ignored["moe_layer_fails"] is None and ignored["moe_runner_backend"] is not None
    assert _fate(ignored) == _fate(plain) == "serves"
    assert (ignored["moe_layer_runner"], ignored["moe_runner_backend"]) == (
        plain["moe_layer_runner"],
        plain["moe_runner_backend"],
    )


@pytest.mark.parametrize(
    ("case", "weights"),
    [("first MoE layer ignored", "bfloat16"), ("ModelOpt FP8", "float8_e4m3fn")],
)
def test_a_layer_in_another_format_is_unknown_never_a_simulated_failure(
    rows: dict[str, dict[str, Any]], case: str, weights: str
) -> None:
    row = rows[case]
    assert row["moe_layer_fails"] is None and row["unpatched_fails_at_warmup"] is None
    assert _fate(row) == "unknown"
    assert f"built with {weights} expert weights" in row["note"]
    assert "loads NVFP4 weights only" in row["note"]


@pytest.mark.parametrize("gpu", ["sm100", "sm120"])
def test_a_runner_the_operator_names_gets_the_fate_it_gets_with_no_flag(
    rows: dict[str, dict[str, Any]], gpu: str
) -> None:
    """Once sm120 read "fails on flashinfer_trtllm" with no flag and "(unknown)" named."""
    auto, named = rows[gpu], rows[f"{gpu} named"]
    assert auto["moe_layer_runner"] == named["moe_layer_runner"] == "flashinfer_trtllm"
    assert _fate(auto) == _fate(named)
    assert _fate(named) == ("fails" if gpu == "sm120" else "unknown")


def test_unknown_says_how_far_the_layer_got(rows: dict[str, dict[str, Any]]) -> None:
    note = rows["sm100 named"]["note"]
    assert (
        "the MoE layer's fate is unknown: built on the flashinfer_trtllm runner, its weights "
        "loaded; when its weights are processed it calls GPU-only code (" in note
    )


def test_a_dense_checkpoint_says_the_patches_do_not_act_on_it(
    rows: dict[str, dict[str, Any]],
) -> None:
    row = rows["dense"]
    assert row["dense"] is True and row["moe_layer_runner"] is None
    assert "dense (its config places no MoE layer): the patches act on NVFP4 MoE" in row["note"]
    assert all(rows[name]["dense"] is False for name in rows if name != "dense")


def test_a_layer_built_without_a_gate_is_unknown(rows: dict[str, dict[str, Any]]) -> None:
    """Once Nemotron-H's relu2 experts were read as SwiGLU ("hidden_act") and shown serving."""
    row = rows["Nemotron-H"]
    assert _fate(row) == "unknown" and row["moe_layer_fails"] is None
    assert "its experts use relu2, a layer the CPU simulation does not build" in row["note"]
