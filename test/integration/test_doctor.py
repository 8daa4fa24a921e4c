"""`doctor` as a user runs it: fresh processes, real SGLang, what SGLang holds read back."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from packaging.version import Version

from sglang_nvfp4_patches.patches import PATCHES
from sglang_nvfp4_patches.supported_releases import TESTED_RELEASES, sglang_version
from support.forkserver import run_cli as cli
from support.forkserver import run_cli_once
from support.release import KV_SCALES_APPLIED, MOE_RUNNER_MISMATCH, RUNNER_PRESCALE, ships
from support.sglang_cpu import runner_module_present


@pytest.mark.release_matrix
def test_doctor_reports_what_sglang_holds() -> None:
    done = run_cli_once("doctor", "--json")  # test_third_patch.py reads it too
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["sglang"] == sglang_version()
    assert result["torch"] and result["flashinfer"]
    assert result["gpu"] == "none"
    assert list(result["patches"]) == [patch.name for patch in PATCHES]  # each, in order
    gemma4 = result["patches"]["gemma4-attention"]
    if ships(KV_SCALES_APPLIED):
        assert gemma4["status"] == "already upstream"
        assert "sglang#28144" in gemma4["reason"]
        assert "verified: SGLang resolves it to trtllm_mha on SM100" in gemma4["reason"]
    else:
        assert gemma4["status"] == "applied"
        # the release's own row of release facts (verify reads the line again)
        assert "FP8 KV-cache path: dropped, recorded by CI for SGLang" in gemma4["reason"]
        assert "verified: SGLang resolves it to triton on SM100" in gemma4["reason"]
    router = result["patches"]["llama4-router-weight"]
    if runner_module_present():
        # Newer releases pre-scale in the runner, but every release up to 0.5.23 still has
        # the ModelOpt NVFP4 rejection, so something is always applied.
        assert router["status"] == "applied"
        assert ("runner pre-scale: upstream" in router["reason"]) is ships(RUNNER_PRESCALE)
    else:
        assert router["status"] == "not applicable"
        assert "no FlashInfer CUTLASS MoE runner" in router["reason"]
    runner = result["patches"]["nvfp4-moe-runner"]
    # shipped for every tested release (a release being added: recorded by its verify run)
    assert any(
        f"evidence: recorded by {origin} for SGLang {sglang_version()}" in runner["reason"]
        for origin in ("CI", "verify on this machine")
    ), runner
    if ships(MOE_RUNNER_MISMATCH):
        assert runner["status"] == "applied"
        assert (
            "registry: ModelOpt NVFP4 MoE layers, any architecture, with no MoE runner given "
            "and no --quantization: gelu, top-k on sm120, sm121; silu, top-1 on sm100, sm103, "
            "sm120, sm121; silu, top-k on sm100, sm103, sm120, sm121 get flashinfer_cutlass "
            "(SGLang's own layer fails at the first forward, and with flashinfer_cutlass it "
            "serves)"
        ) in runner["reason"], runner
        assert (
            "; --quantization modelopt_fp4: silu, top-1 on sm100, sm103; silu, top-k on "
            in (runner["reason"])
        )
        assert (
            "gelu, top-k on sm100, sm103 are not covered (no stand-in with these settings"
            in (runner["reason"])
        )
    else:
        assert runner["status"] == "not applicable", runner
        assert "gets flashinfer_cutlass" not in runner["reason"]
    for report in result["patches"].values():
        assert report["reason"]


REPO = Path(__file__).resolve().parents[2]
# What the README's first screen calls each patch it names in bold.
FIRST_SCREEN_NAMES = {
    "Gemma 4 guard": "gemma4-attention",
    "Llama 4": "llama4-router-weight",
    "MoE runner": "nvfp4-moe-runner",
}
# docs/releases.md's table of what `doctor` says per release: one column per patch.
DOCTOR_TABLE = "| SGLang | `gemma4-attention` |"


def _releases_in(cell: str) -> set[str]:
    """The tested releases a table's first cell names: ``a – b``, ``a, b`` or ``a``."""
    if "–" in cell:
        low, high = (Version(end.strip()) for end in cell.split("–"))
        return {release for release in TESTED_RELEASES if low <= Version(release) <= high}
    return {part.strip() for part in cell.split(",")}


def _row_here(path: Path, header_start: str) -> list[str]:
    """The cells of the row for this SGLang in ``path``'s table whose header starts so."""
    lines = path.read_text(encoding="utf-8").splitlines()
    start = next(n for n, line in enumerate(lines) if line.startswith(header_start))
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split(" | ")]
        if sglang_version() in _releases_in(cells[0]):
            return cells
    pytest.fail(f"{path.name}: no row of the table '{header_start}...' names {sglang_version()}")


@pytest.mark.release_matrix
def test_the_first_screen_says_what_doctor_says_here() -> None:
    """The README's per-release table: the patches a row names in bold are the ones `doctor`
    reports applied on each release of that row, and docs/releases.md's `doctor` table gives
    each patch's status as `doctor` does."""
    if sglang_version() not in TESTED_RELEASES:
        pytest.skip("the tables name tested releases only")
    done = run_cli_once("doctor", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    statuses = {name: r["status"] for name, r in json.loads(done.stdout)["patches"].items()}
    row = _row_here(REPO / "README.md", "| SGLang | what the plugin does |")
    named = {FIRST_SCREEN_NAMES[bold] for bold in re.findall(r"\*\*(.+?)\*\*", row[1])}
    assert named == {name for name, status in statuses.items() if status == "applied"}, row
    releases_md = REPO / "docs" / "releases.md"
    header = next(
        line
        for line in releases_md.read_text(encoding="utf-8").splitlines()
        if line.startswith(DOCTOR_TABLE)
    )
    columns = [cell.strip().strip("`") for cell in header.strip("|").split(" | ")]
    row = _row_here(releases_md, DOCTOR_TABLE)
    for name, status in statuses.items():
        assert row[columns.index(name)].startswith(status), (name, status, row)


def test_doctor_says_applied_and_forced_under_force() -> None:
    done = cli("doctor", "--json", SGLANG_NVFP4_PATCHES_FORCE="gemma4-attention")
    assert done.returncode == 0, done.stderr[-3000:]
    gemma4 = json.loads(done.stdout)["patches"]["gemma4-attention"]
    assert gemma4["status"] == "applied"
    assert "forced by SGLANG_NVFP4_PATCHES_FORCE" in gemma4["reason"]
    assert "verified: SGLang resolves it to triton on SM100" in gemma4["reason"]
    misspelt = cli("doctor", "--json", SGLANG_NVFP4_PATCHES_FORCE="gemma4-atention")
    assert (misspelt.returncode, misspelt.stdout) == (2, "")  # bad input, never a verdict
    assert "SGLANG_NVFP4_PATCHES_FORCE" in misspelt.stderr and "gemma4-atention" in misspelt.stderr


def test_doctor_shows_disabled_and_fails_on_a_bad_setting() -> None:
    disabled = cli("doctor", "--json", SGLANG_NVFP4_PATCHES_DISABLE="gemma4-attention")
    assert disabled.returncode == 0, disabled.stderr[-3000:]
    assert json.loads(disabled.stdout)["patches"]["gemma4-attention"]["status"] == "disabled"
    broken = cli("doctor", SGLANG_NVFP4_PATCHES_DISABLE="gemma-attention")
    assert (broken.returncode, broken.stdout) == (2, "")  # bad input, not a failed patch
    assert broken.stderr.startswith("error: SGLANG_NVFP4_PATCHES_DISABLE='gemma-attention'")


def test_a_whitelist_that_leaves_the_plugin_out_fails_where_a_bug_is_live() -> None:
    """Once exit 0 with every patch "disabled: SGLang did not load the plugin" while the bugs
    were live; explain's note said only "SGLang did not load the plugin; see doctor"."""
    done = cli("doctor", "--json", SGLANG_PLUGINS="nvfp4_patchs")  # misspelt
    patches = json.loads(done.stdout)["patches"]
    why = "SGLang did not load the plugin: SGLANG_PLUGINS='nvfp4_patchs' does not name"
    assert all(why in report["reason"] for report in patches.values()), patches
    live = [name for name, r in patches.items() if r["status"] in ("not patched", "unknown")]
    assert done.returncode == (1 if live else 0), done.stderr[-3000:]
    # What doctor says with the plugin loaded: a patch applied is a bug live here.
    loaded = json.loads(run_cli_once("doctor", "--json").stdout)["patches"]
    assert live == [name for name, r in loaded.items() if r["status"] == "applied"], patches
    explained = cli("explain", "--gpu", "sm120", SGLANG_PLUGINS="nvfp4_patchs")
    assert f"note: no patch is applied ({why} nvfp4_patches (add it there));" in explained.stderr
