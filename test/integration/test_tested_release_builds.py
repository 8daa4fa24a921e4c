"""Builds of a tested release: copies of the installed SGLang (``support/edited_sglang``) whose
dist-info says another version, each run in a process forked from the fork server that loads
plugins as SGLang does (``load_plugins()``), then runs ``doctor`` (``next_release_probe.py``):

* a local build (``+gabc123``), its sources unchanged: tested by its version, and the records
  CI shipped for the installed release match its sources, so the two patches that decide from
  records decide as on that release, and ``doctor`` says whose record it is;
* a post release of the newest tested one (``.post1``), its sources unchanged: untested by its
  version, yet its sources are the installed release's, so the patches apply with no opt-in,
  and ``doctor`` and the log say why;
* the same post release with one line added to a MoE source the records fingerprint: untested,
  nothing patched, no record used (``nvfp4-moe-runner`` cannot tell), as on any untested
  release.

The three processes start at once (module fixture) and run side by side.
"""

from __future__ import annotations

from typing import Any

import pytest

from sglang_nvfp4_patches.supported_releases import NEWEST_TESTED, sglang_version
from support import SCRIPTS, result_of
from support.edited_sglang import MOE_TOPK, a_line_added, make_edited_copy
from support.forkserver import server

PROBE = str(SCRIPTS / "next_release_probe.py")
INSTALLED = sglang_version()
LOCAL = f"{INSTALLED}+gabc123"
POST = f"{NEWEST_TESTED}.post1"
RECORDED = f"recorded by CI for SGLang {INSTALLED}, whose sources this build has"
OURS = "sglang_nvfp4_patches"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    def copy(name: str, version: str, edits: dict | None = None) -> str:
        return str(make_edited_copy(tmp_path_factory.mktemp(name), edits, version))

    copies = {
        "local": copy("local", LOCAL),
        "post": copy("post", POST),
        "post, edited": copy("post_edited", POST, {MOE_TOPK: a_line_added}),
    }
    fork = server()
    started = {name: fork.start([PROBE, path, "doctor"], {}) for name, path in copies.items()}
    return {name: child.wait(timeout=300) for name, child in started.items()}


def our_lines(stderr: str, level: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith(f"{level}:{OURS}")]


def test_a_local_build_decides_from_the_record_of_the_release_whose_sources_it_has(
    runs: dict,
) -> None:
    done = runs["local"]
    result = result_of(done)
    assert result["release"] == "tested"
    assert result["doctor_exit"] == 0, result
    runner = result["doctor"]["nvfp4-moe-runner"]
    assert runner["status"] == "applied" and f"(evidence: {RECORDED})" in runner["reason"]
    llama4 = result["doctor"]["llama4-router-weight"]
    assert llama4["status"] == "applied", llama4
    assert "no record" not in llama4["reason"]  # its runner part read the record


def test_a_post_release_with_a_tested_releases_sources_is_that_release(runs: dict) -> None:
    done = runs["post"]
    result = result_of(done)
    assert result["release"] == f"tested: its sources equal tested release {INSTALLED}'s"
    assert result["doctor_exit"] == 0, result
    assert result["doctor"] == result_of(runs["local"])["doctor"]  # the same decisions
    assert "by opt-in" not in str(result["doctor"])
    assert our_lines(done.stderr, "WARNING") == [] and our_lines(done.stderr, "ERROR") == []
    said = (
        f"INFO:{OURS}:sglang-nvfp4-patches: SGLang {POST} is newer than the newest tested "
        f"release ({NEWEST_TESTED}), but its sources equal tested release {INSTALLED}'s: the "
        f"patches apply as on {INSTALLED}."
    )
    assert said in done.stderr.splitlines(), done.stderr[-3000:]


def test_a_post_release_with_an_edited_moe_source_stays_untested(runs: dict) -> None:
    done = runs["post, edited"]
    result = result_of(done)
    assert result["release"].startswith(f"untested: SGLang {POST} is newer"), result["release"]
    assert result["release"].endswith("nothing patched")
    assert result["doctor_exit"] == 1
    runner = result["doctor"]["nvfp4-moe-runner"]
    assert runner["status"] == "unknown"
    assert runner["reason"].startswith(f"no verified record for SGLang {POST}"), runner
    llama4 = result["doctor"]["llama4-router-weight"]  # no row: unknown, and how to check
    assert llama4["status"] == "unknown", llama4
    assert llama4["reason"].endswith("; run `sglang-nvfp4-patches verify`"), llama4
    warnings = our_lines(done.stderr, "WARNING")
    assert any(POST in line and "nothing is patched" in line for line in warnings), warnings
    assert "its sources equal" not in done.stderr
