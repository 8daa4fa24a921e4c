"""The root-cause probe on hand-edited copies of the installed ``trtllm_mha_backend.py``
(``support/edited_sglang.py``), in the real file's surroundings: three edits drop the FP8
V scale behind a helper, a module constant or a call-site override; one adds a constant
``bmm2_scale`` only where the KV cache is not FP8; one takes the V scale from another
module's object, which the probe cannot follow. ``explain --gpu sm100`` then runs in a
process whose SGLang keeps its backend in the copy (``support/edited_sglang.py``).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sglang_nvfp4_patches.gemma4_attention.v_scale_question import analyse_backend_source
from sglang_nvfp4_patches.simulation.bundled import EXAMPLES_DIR
from support import edited_sglang
from support.edited_sglang import BACKEND, EDITS, installed_package_dir, make_bug_window_copy
from support.forkserver import json_lines, server

CLI = Path(edited_sglang.__file__)
# where a live verdict quotes the line that decided it
NAMED_LINE = {
    "dropped": r"is a constant: `(?P<text>[^`]+)` l\.(?P<line>\d+)",
    "unknown": r"cannot follow .* past `(?P<text>[^`]+)` l\.(?P<line>\d+)",
}
NVFP4_MOE_FP8_KV = EXAMPLES_DIR / "gemma-4-26b-a4b-nvfp4"  # kv_cache_scheme: 8-bit float


@pytest.fixture(scope="module")
def copies(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return {
        name: make_bug_window_copy(tmp_path_factory.mktemp("edited"), edit)
        for name, (edit, *_) in EDITS.items()
    }


@pytest.fixture(scope="module")
def explained(copies: dict[str, Path]) -> dict[str, dict]:
    """``explain --gpu sm100 --json`` on the NVFP4 MoE config, one process per copy, together."""
    args = ["explain", "--gpu", "sm100", "--model", str(NVFP4_MOE_FP8_KV), "--json"]
    started = {name: server().start([str(CLI), str(copy), *args]) for name, copy in copies.items()}
    rows = {}
    for name, child in started.items():
        done = child.wait(600)
        assert done.returncode == 0, done.stderr[-3000:]
        (rows[name],) = json_lines(done.stdout)
    return rows


def edited_source(copy: Path) -> str:
    return (copy / "sglang" / BACKEND).read_text(encoding="utf-8")


@pytest.mark.parametrize("name", list(EDITS))
def test_probe_reads_each_edit(name: str, copies: dict[str, Path]) -> None:
    _, expected, _, _ = EDITS[name]
    source = edited_source(copies[name])
    installed = (installed_package_dir() / BACKEND).read_text(encoding="utf-8")
    assert source != installed
    verdict = analyse_backend_source(source)
    assert verdict.handoff.value == expected, verdict.evidence
    if expected in NAMED_LINE:
        # the evidence names a line the edit introduced, and quotes it
        match = re.search(NAMED_LINE[expected], verdict.evidence)
        assert match is not None, verdict.evidence
        line = source.splitlines()[int(match["line"]) - 1].strip()
        assert line == match["text"] and line not in installed


@pytest.mark.parametrize("name", list(EDITS))
def test_explain_follows_the_probe(name: str, explained: dict[str, dict]) -> None:
    _, expected, backend, decided_by = EDITS[name]
    row = explained[name]
    assert (row["attention_backend"], row["decided_by"]) == (backend, decided_by), row
    assert row["unpatched_attention_backend"] == "trtllm_mha"
    if expected == "dropped":
        assert "drops the FP8 KV-cache V scale" in row["note"]
        assert "is a constant" in row["note"]
    if expected == "unknown":  # its own verdict, naming the line the probe stopped at
        assert "root cause unknown, counted as live" in row["note"]
        assert "`v_scale = self.kv_cache_quant_method.scale_for(layer)`" in row["note"]
