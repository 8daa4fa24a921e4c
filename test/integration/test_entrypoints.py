"""Every way a user starts SGLang gets the rule, on every release (simulated SM100).

Each entry point runs in a fresh interpreter and loads the plugin itself; see
``support/entrypoint_probe.py``. ``SGLANG_NVFP4_PATCHES_FORCE=gemma4-attention`` puts the rule
in force on releases where its root cause is fixed, so every entry point is checked on every
release. The four probes run concurrently to keep CI short.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.version import Version

from support.configs import GEMMA4_NVFP4_MOE
from support.gemma4_cases import resolved
from support.release import installed_sglang

pytestmark = pytest.mark.release_matrix
PROBE = Path(__file__).resolve().parents[1] / "support" / "entrypoint_probe.py"
ENTRIES = ("launch_server", "serve", "engine", "engine_prebuilt")
WARNING_PREFIX = "WARNING:sglang_nvfp4_patches"


@pytest.fixture(scope="module")
def started() -> dict[str, tuple[dict, str]]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("SGLANG_NVFP4")}
    environment.pop("SGLANG_PLUGINS", None)
    environment["SGLANG_NVFP4_PATCHES_FORCE"] = "gemma4-attention"
    processes = {
        entry: subprocess.Popen(
            [sys.executable, str(PROBE), entry, str(GEMMA4_NVFP4_MOE)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=environment,
        )
        for entry in ENTRIES
    }
    results = {}
    for entry, process in processes.items():
        stdout, stderr = process.communicate(timeout=600)
        assert process.returncode == 0, f"{entry}: {stderr[-3000:]}"
        (line,) = [x for x in stdout.splitlines() if x.startswith("STATE ")]
        results[entry] = (json.loads(line[len("STATE ") :]), stderr)
    return results


@pytest.mark.parametrize("entry", ["launch_server", "serve", "engine"])
def test_entry_point_resolves_triton(started: dict, entry: str) -> None:
    state, stderr = started[entry]
    assert state["sglang"] == installed_sglang()
    assert state["attention_backend"] == "triton"
    assert [line for line in stderr.splitlines() if line.startswith(WARNING_PREFIX)] == []


def test_engine_with_server_args_built_before_plugins(started: dict) -> None:
    """0.5.20+ resolve inside the engine, after plugins load: the rule applies. Older releases
    resolve on construction, before the engine loads plugins: the rule never saw the record,
    so the scheduler says so in one WARNING with the ways out."""
    state, stderr = started["engine_prebuilt"]
    warnings = [line for line in stderr.splitlines() if line.startswith(WARNING_PREFIX)]
    # 0.5.12.x/0.5.13.x default this config to triton on their own: nothing was bypassed.
    own = resolved(GEMMA4_NVFP4_MOE, "sm100", patched=False)["attention_backend"]
    if Version(installed_sglang()) >= Version("0.5.20") or own == "triton":
        assert state["attention_backend"] == "triton"
        assert warnings == []
    else:
        assert state["attention_backend"] == own == "trtllm_mha"
        assert len(warnings) == 1
        assert "resolved before SGLang loaded plugins" in warnings[0]
        assert "load_plugins()" in warnings[0]
