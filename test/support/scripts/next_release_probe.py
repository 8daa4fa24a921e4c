"""Run in a fresh process on an edited copy of SGLang (a simulated release): load plugins the
way SGLang does, then print one ``RESULT`` line of JSON.

``next_release_probe.py COPY verify-PATCH``: ``verify``'s checks of that patch, as its check
process runs them (``nvfp4-moe-runner``'s layouts across CPU ranks aside: they cost two minutes
of CPU, are not what these tests ask, and ``test_multi_rank.py`` reads them from ``verify``);
``next_release_probe.py COPY layer``: build a Llama 4 ModelOpt NVFP4 layer (top-1, the flag
on) on a simulated SM120 and say whether its method still sees the flag, and doctor's state;
``next_release_probe.py COPY hooks``: how many of our hooks each NVFP4 method's
``create_moe_runner`` carries, and doctor's state;
``next_release_probe.py COPY agree``: ``doctor --json``'s result and exit status, then
``verify``'s Llama 4 checks, in one process (doctor first, as a user runs it);
``next_release_probe.py COPY doctor``: ``doctor --json``'s release line, result and exit status
alone (after ``verify`` kept its record, in a fresh process).
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any


def _use_copy(copy: str) -> None:
    """``support/edited_sglang.py``'s ``put_first`` (this script runs without ``test/`` on
    ``sys.path``): the copy's SGLang first, once."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from edited_sglang import put_first

    sys.path.pop(0)
    put_first(copy)


def _layer() -> dict[str, Any]:
    from sglang_nvfp4_patches.llama4_router_weight.commands import current_state
    from sglang_nvfp4_patches.simulation.bundled import LLAMA4_NVFP4
    from sglang_nvfp4_patches.simulation.llama4_layers import modelopt_layer
    from sglang_nvfp4_patches.simulation.scheduler import moe_layer_build_on

    with moe_layer_build_on("sm120", LLAMA4_NVFP4, quantization="modelopt_fp4"):
        moe = modelopt_layer(top_k=1)
        moe.build()
    return {
        "method_sees_flag": bool(moe.method.moe_runner_config.apply_router_weight_on_input),
        "runner_keeps_flag": bool(moe.method.runner.config.apply_router_weight_on_input),
        "doctor": current_state().as_dict(),
    }


def _hooks() -> dict[str, Any]:
    import importlib

    from sglang_nvfp4_patches.llama4_router_weight.commands import current_state
    from sglang_nvfp4_patches.llama4_router_weight.method_lift import create_moe_runner_hook
    from sglang_nvfp4_patches.llama4_router_weight.rule import REJECTING_METHODS
    from sglang_nvfp4_patches.sglang_hooks import bound_at, hook_count

    for rejecting in REJECTING_METHODS:
        importlib.import_module(rejecting.module)
    return {
        "hooks": {
            rejecting.part.key: hook_count(bound_at(rejecting.target), create_moe_runner_hook)
            for rejecting in REJECTING_METHODS
        },
        "doctor": current_state().as_dict(),
    }


def _doctor() -> dict[str, Any]:
    from sglang_nvfp4_patches import doctor

    found = doctor.collect()
    return {
        "release": found["release"],
        "doctor": found["patches"],
        "doctor_exit": doctor.exit_status(found),
    }


def _agree() -> dict[str, Any]:
    from sglang_nvfp4_patches.llama4_router_weight import checks as llama4

    return {**_doctor(), "verify": [check.as_dict() for check in llama4.run_checks()]}


def main(copy: str, action: str) -> None:
    logging.basicConfig(level=logging.INFO)
    _use_copy(copy)
    from sglang.srt.plugins import load_plugins

    load_plugins()
    if action == "layer":
        result: Any = _layer()
    elif action == "hooks":
        result = _hooks()
    elif action == "agree":
        result = _agree()
    elif action == "doctor":
        result = _doctor()
    else:  # verify-PATCH: that patch's checks, as verify's check process runs them
        from sglang_nvfp4_patches.nvfp4_moe_runner import evidence
        from sglang_nvfp4_patches.patches import PATCHES

        (patch,) = [patch for patch in PATCHES if action == f"verify-{patch.name}"]
        evidence.gather_layouts = lambda: ({}, ["not run by this probe"])
        result = [check.as_dict() for check in patch.verify_checks()]
    print("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
