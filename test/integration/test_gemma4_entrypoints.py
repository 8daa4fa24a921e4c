"""Every way a user starts SGLang gets the rule, on every release (simulated SM100).

Each entry point runs in a fresh process and loads the plugin itself; see
``support/scripts/entrypoint_probe.py``. ``SGLANG_NVFP4_PATCHES_FORCE=gemma4-attention`` puts
the rule in force on releases where its root cause is fixed, so every entry point is checked
on every release. The four probes run concurrently, forked from one process that has imported the
``sglang`` package and loaded no plugin (``support/forkserver.py``).
"""

from __future__ import annotations

import json

import pytest
from sglang.srt.server_args import ServerArgs

from sglang_nvfp4_patches.supported_releases import sglang_version
from support import SCRIPTS
from support.configs import GEMMA4_NVFP4_MOE
from support.forkserver import server
from support.gemma4_cases import resolved
from support.release import NO_CPU_KERNEL_RELEASES

pytestmark = pytest.mark.release_matrix
PROBE = SCRIPTS / "entrypoint_probe.py"
ENTRIES = ("launch_server", "serve", "engine", "engine_prebuilt")
WARNING_PREFIX = "WARNING:sglang_nvfp4_patches"
FORCED = {"SGLANG_NVFP4_PATCHES_FORCE": "gemma4-attention"}


NO_CPU_KERNELS = "Could not load any common_ops library"  # support.release: NO_CPU_KERNEL_RELEASES


class Started(dict):
    def __getitem__(self, entry: str) -> tuple[dict, str]:
        done = super().__getitem__(entry)
        if (
            done.returncode != 0
            and NO_CPU_KERNELS in done.stderr
            and sglang_version() in NO_CPU_KERNEL_RELEASES
        ):
            pytest.skip(f"SGLang {sglang_version()}'s {entry} does not import on CPU here")
        assert done.returncode == 0, f"{entry}: {done.stderr[-3000:]}"
        (line,) = [x for x in done.stdout.splitlines() if x.startswith("STATE ")]
        return json.loads(line[len("STATE ") :]), done.stderr


@pytest.fixture(scope="module")
def started() -> Started:
    processes = {
        entry: server().start([str(PROBE), entry, str(GEMMA4_NVFP4_MOE)], FORCED)
        for entry in ENTRIES
    }
    return Started({entry: process.wait(timeout=600) for entry, process in processes.items()})


@pytest.mark.parametrize("entry", ["launch_server", "serve", "engine"])
def test_entry_point_resolves_triton(started: dict, entry: str) -> None:
    state, stderr = started[entry]
    assert state["sglang"] == sglang_version()
    assert state["attention_backend"] == "triton"
    assert [line for line in stderr.splitlines() if line.startswith(WARNING_PREFIX)] == []


def test_engine_with_server_args_built_before_plugins(started: dict) -> None:
    """A release whose ``ServerArgs`` defers resolution (``resolve_once``, 0.5.19+) resolves
    inside the engine, after plugins load: the rule applies. Older releases resolve on
    construction, before the engine loads plugins: the rule never saw the record, so the
    scheduler says so in one WARNING with the ways out."""
    state, stderr = started["engine_prebuilt"]
    warnings = [line for line in stderr.splitlines() if line.startswith(WARNING_PREFIX)]
    # 0.5.12.x/0.5.13.x default this config to triton on their own: nothing was bypassed.
    own = resolved(GEMMA4_NVFP4_MOE, "sm100", patched=False)["attention_backend"]
    if hasattr(ServerArgs, "resolve_once") or own == "triton":
        assert state["attention_backend"] == "triton"
        assert warnings == []
    else:
        assert state["attention_backend"] == own == "trtllm_mha"
        assert len(warnings) == 1
        assert "resolved before SGLang loaded plugins" in warnings[0]
        assert "load_plugins()" in warnings[0]
