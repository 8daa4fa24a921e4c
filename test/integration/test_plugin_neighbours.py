"""Beside a second real plugin (its own distribution and entry point), every hook on every
target ours hooks is wired exactly once and runs once per call, in either load order and
whether the targets' modules are imported before or during ``load_plugins()``."""

from __future__ import annotations

import json

import pytest

from sglang_nvfp4_patches.supported_releases import sglang_version
from support import SCRIPTS
from support.forkserver import run_python
from support.release import NO_CPU_KERNEL_RELEASES

pytestmark = pytest.mark.release_matrix
PROBE = SCRIPTS / "neighbour_probe.py"


@pytest.mark.parametrize(
    "import_first", [False, True], ids=["imported-while-loading", "imported-before"]
)
@pytest.mark.parametrize("neighbour", ["first", "last"])
def test_a_second_plugin_and_ours_are_each_wired_once(neighbour: str, import_first: bool) -> None:
    args = [str(PROBE), "--neighbour", neighbour] + (["--import-first"] if import_first else [])
    scheduler = sglang_version() not in NO_CPU_KERNEL_RELEASES
    if not scheduler:
        args.append("--no-scheduler")
    env = {
        "SGLANG_PLUGINS": "nvfp4_patches,nvfp4_test_neighbour",
        # The Gemma 4 rule's hooks too, on releases where its root cause is fixed.
        "SGLANG_NVFP4_PATCHES_FORCE": "gemma4-attention",
    }
    done = run_python(args, env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("STATE ")]
    state = json.loads(line[len("STATE ") :])
    assert state and any(t.endswith("Scheduler.__init__") for t in state) is scheduler
    for target, counts in state.items():
        assert counts == {"ours": 1, "neighbour": 1, "neighbour_calls": 1}, target
