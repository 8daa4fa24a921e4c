"""``doctor``'s text: one short status line per patch, the evidence on wrapped lines below."""

from __future__ import annotations

import pytest

from sglang_nvfp4_patches.report_text import WIDTH, clauses, patch_lines

# Reasons as doctor reported them on SGLang 0.5.23 (README, before this layout).
GEMMA = (
    "trtllm_mha applies FP8 KV-cache scales here (sglang#28144); SGLang's default stands: "
    "trtllm_mha_backend.py, FP8 KV-cache path: bmm2_scale of all 4 trtllm_batch_* calls comes "
    'from the layer\'s V scale (`v_scale = self._get_scalar_scale(layer, "v_scale_float", '
    '"v_scale")` l.703 in _get_bmm_scales()) (verified: SGLang resolves it to trtllm_mha on '
    "SM100)"
)
LLAMA = (
    "runner pre-scale: upstream; ModelOpt NVFP4 rejection: lifted; compressed-tensors NVFP4 "
    "rejection: lifted; --use-ray: applied in Ray scheduler actors only when the Ray job's "
    "worker_process_setup_hook is sglang.srt.plugins.load_plugins (no Ray job in this "
    "process; the driver warns when the hook is missing)"
)


def test_clauses_split_at_top_level_semicolons_only() -> None:
    assert clauses(LLAMA) == [
        "runner pre-scale: upstream;",
        "ModelOpt NVFP4 rejection: lifted;",
        "compressed-tensors NVFP4 rejection: lifted;",
        "--use-ray: applied in Ray scheduler actors only when the Ray job's "
        "worker_process_setup_hook is sglang.srt.plugins.load_plugins (no Ray job in this "
        "process; the driver warns when the hook is missing)",
    ]
    assert clauses("a `x; y` b; c") == ["a `x; y` b;", "c"]
    assert clauses("") == []


@pytest.mark.parametrize(
    ("status", "reason", "first"),
    [
        (
            "already upstream",
            GEMMA,
            "gemma4-attention      already upstream: trtllm_mha applies FP8 KV-cache scales "
            "here (sglang#28144);",
        ),
        ("applied", LLAMA, "llama4-router-weight  applied: runner pre-scale: upstream;"),
        ("disabled", "listed in X", "llama4-router-weight  disabled: listed in X"),
    ],
)
def test_one_status_line_then_the_evidence_indented_and_nothing_lost(
    status: str, reason: str, first: str
) -> None:
    label = first.split("  ")[0].ljust(len("llama4-router-weight"))
    lines = patch_lines(label, status, reason)
    assert lines[0] == first
    assert all(len(line) <= WIDTH for line in lines)
    assert all(line.startswith(" " * (len(label) + 4)) for line in lines[1:])
    assert " ".join(" ".join(lines).split()) == " ".join(f"{label} {status}: {reason}".split())
