"""A checkpoint's first MoE layer across 2 and 4 real processes, one rank each, with SGLang's
own parallel state on ``gloo`` (``simulation/ranks.py``): ``verify`` shows every rank's output,
reduced as the model's MoE block reduces it, is what the layer means, and that SGLang handed
FlashInfer's kernel each rank's expert- and tensor-parallel placement (read here). A plugin
planted beside ours that hands every rank expert-parallel rank 0 is caught as a wrong output;
a layout SGLang refuses is its refusal. Each rank is a fresh interpreter importing SGLang
(about 10 s of CPU): the primary release only (not in the release matrix).
"""

from __future__ import annotations

import multiprocessing
import tempfile
from pathlib import Path

import pytest

from sglang_nvfp4_patches.simulation.bundled import QWEN3_MOE_NVFP4
from sglang_nvfp4_patches.simulation.moe_forward import LayerVerdict
from sglang_nvfp4_patches.simulation.ranks import run_across_ranks
from support.forkserver import run_cli_once

CUTLASS = "flashinfer_cutlass"
RANK_NAME = "nvfp4-moe-rank-"  # the ranks' process names
# What SGLang passes FlashInfer's kernel on each rank: (ep_size, ep_rank, tp_size, tp_rank).
KERNEL_RANKS = {
    "tp2": ((1, 0, 2, 0), (1, 0, 2, 1)),
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


def test_verify_shows_tp_ep_and_pp_serving_across_2_and_4_ranks() -> None:
    """The runs behind the release facts' ``layouts`` cell, read from ``verify`` (run once per
    session): TP at 2 ranks and PP at 2 on Qwen3-MoE (top-8), EP at 4 on Llama 4 (top-1, the
    router weight on the input: ``expert(x*w)``), launched with no runner flag."""
    done = run_cli_once("verify")
    line = next(
        found for found in done.stdout.splitlines() if "layouts across 2 and 4 CPU ranks" in found
    )
    assert line.startswith("held "), line
    per_rank = "the kernel's ep_size,ep_rank,tp_size,tp_rank per rank:"
    qwen3, llama4 = "nvidia/Qwen3-30B-A3B-FP4", "nvidia/Llama-4-Scout-17B-16E-Instruct-FP4"
    tp2 = f"{qwen3} tp2 on sm120: serves (output = sum_k w_k*expert_k(x) on every rank"
    ep4 = f"{llama4} ep4 on sm100: serves (output = expert(x*w) on every rank"
    pp2 = f"{qwen3} pp2 on sm120: serves (output = sum_k w_k*expert_k(x) on every rank"
    for run, ranks in ((tp2, KERNEL_RANKS["tp2"]), (ep4, KERNEL_RANKS["ep4"]), (pp2, None)):
        assert run in line, line
        if ranks is not None:
            placement = " ".join(",".join(map(str, rank)) for rank in ranks)
            assert f"{per_rank} {placement})" in line.split(run, 1)[1].split(";")[1], line


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
