"""A checkpoint's first MoE layer across 2 and 4 real processes, one rank each, with SGLang's
own parallel state on ``gloo`` (``simulation/ranks.py``): every rank's output, reduced as the
model's MoE block reduces it, is what the layer means, and SGLang handed FlashInfer's kernel
each rank's expert- and tensor-parallel placement. A plugin planted beside ours that hands
every rank expert-parallel rank 0 is caught as a wrong output; a layout SGLang refuses is its
refusal. Each rank is a fresh interpreter importing SGLang (about 10 s of CPU): the primary
release only (not in the release matrix), and as few layouts as cover TP and EP at 2 and 4
ranks.
"""

from __future__ import annotations

import multiprocessing
import tempfile
from pathlib import Path

import pytest

from sglang_nvfp4_patches.simulation.bundled import LLAMA4_NVFP4, QWEN3_MOE_NVFP4
from sglang_nvfp4_patches.simulation.moe_forward import LayerVerdict
from sglang_nvfp4_patches.simulation.ranks import run_across_ranks

CUTLASS = "flashinfer_cutlass"
RANK_NAME = "nvfp4-moe-rank-"  # the ranks' process names
# What SGLang passes FlashInfer's kernel on each rank: (ep_size, ep_rank, tp_size, tp_rank).
KERNEL_RANKS = {
    "tp2": ((1, 0, 2, 0), (1, 0, 2, 1)),
    "ep2": ((2, 0, 1, 0), (2, 1, 1, 0)),
    "ep4": ((4, 0, 1, 0), (4, 1, 1, 0), (4, 2, 1, 0), (4, 3, 1, 0)),
}
PLANTED = "nvfp4_test_planted"
# A second plugin, its own distribution: SGLang's CUTLASS runner hands the kernel ep_rank 0 on
# every rank (each rank still holds its own experts' weights).
PLANTED_SOURCE = """
def register():
    from sglang.srt.layers.moe.moe_runner import flashinfer_cutlass as runner

    found = runner._flashinfer_cutlass_fused_moe

    def planted():
        kernel, activation_type = found()
        return (lambda **kwargs: kernel(**{**kwargs, "ep_rank": 0})), activation_type

    runner._flashinfer_cutlass_fused_moe = planted
"""


def planted_plugin(root: Path) -> Path:
    """The planted plugin's module and dist-info under ``root`` (put on ``sys.path``)."""
    (root / f"{PLANTED}.py").write_text(PLANTED_SOURCE, encoding="utf-8")
    info = root / f"{PLANTED}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: nvfp4-test-planted\nVersion: 1.0\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text(
        f"[sglang.srt.plugins]\n{PLANTED} = {PLANTED}:register\n", encoding="utf-8"
    )
    return root


@pytest.mark.parametrize("layout", ["tp2", "ep4"])
def test_qwen3_moe_serves_across_ranks_and_the_kernel_gets_each_ranks_placement(
    layout: str,
) -> None:
    run = run_across_ranks(QWEN3_MOE_NVFP4, "sm120", layout, {"moe_runner_backend": CUTLASS})
    assert (run.verdict, run.runner) == (LayerVerdict.SERVES, CUTLASS), run.detail
    assert run.detail.startswith("output = sum_k w_k*expert_k(x) on every rank"), run.detail
    assert run.world == len(KERNEL_RANKS[layout])
    assert run.kernel_ranks == KERNEL_RANKS[layout]


def test_llama4_under_expert_parallelism_serves_its_router_weight_on_the_input() -> None:
    """No runner flag on SM100: the plugin, loaded by SGLang in every rank, lifts SGLang's
    refusal of the router weight on the input (top-1: the output is ``expert(x*w)``)."""
    run = run_across_ranks(LLAMA4_NVFP4, "sm100", "ep2")
    assert (run.verdict, run.runner) == (LayerVerdict.SERVES, CUTLASS), run.detail
    assert run.detail.startswith("output = expert(x*w) on every rank"), run.detail
    assert run.kernel_ranks == KERNEL_RANKS["ep2"]


def test_a_planted_plugin_that_hands_every_rank_ep_rank_0_is_a_wrong_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(planted_plugin(tmp_path)))  # the ranks start with it
    monkeypatch.setenv("SGLANG_PLUGINS", f"nvfp4_patches,{PLANTED}")
    run = run_across_ranks(QWEN3_MOE_NVFP4, "sm120", "ep2", {"moe_runner_backend": CUTLASS})
    assert run.verdict is LayerVerdict.WRONG, run.detail
    assert run.detail.startswith("output != sum_k w_k*expert_k(x) on rank"), run.detail
    assert run.kernel_ranks == ((2, 0, 1, 0), (2, 0, 1, 0))


def test_a_layout_sglang_refuses_is_its_refusal_and_leaves_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Expert-parallel 4 on 2 tensor-parallel ranks: SGLang's own ServerArgs refuses it. The
    first rank to refuse answers; the other is ended, and nothing of the run is left."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the run's files go
    flags = {"moe_runner_backend": CUTLASS, "ep_size": 4}
    run = run_across_ranks(QWEN3_MOE_NVFP4, "sm120", "tp2", flags)
    assert run.verdict is LayerVerdict.FAILS, run.detail
    assert run.detail == (
        "SGLang refuses it: The expert parallel size must be 1 or the same as the tensor "
        "parallel size"
    )
    assert (run.runner, run.kernel_ranks) == (None, ())
    assert [c for c in multiprocessing.active_children() if c.name.startswith(RANK_NAME)] == []
    assert list(tmp_path.iterdir()) == []
