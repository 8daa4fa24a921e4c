"""Run in a fresh interpreter: our plugin beside a second real plugin that hooks every target
ours hooks; print how often each plugin's hook is wired into each target and how often the
neighbour's runs per call.

``--neighbour first|last`` puts the neighbour's distribution before or after ours on
``sys.path`` (``load_plugins()`` runs plugins in that order); ``--import-first`` imports the
targets' modules before ``load_plugins()`` (otherwise ``apply_hooks()`` imports them, in the
middle of loading).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import json
import os
import pkgutil
import re
import sys
from pathlib import Path
from types import SimpleNamespace

NEIGHBOUR_DIR = Path(__file__).resolve().parent / "neighbour_plugin"
SCHEDULER_INIT = "sglang.srt.managers.scheduler.Scheduler.__init__"
ADJUSTMENTS = "sglang.srt.server_args.ServerArgs._handle_model_specific_adjustments"


# How the released methods spell their rejection (0.5.15.post1 to 0.5.23).
REJECTION = re.compile(
    r"assert\s*\(?\s*not\s+(self\.)?moe_runner_config\.apply_router_weight_on_input"
)


def still_rejects(module: str) -> bool:
    """Whether the module's source still asserts the flag away (read without importing it or
    its package: importing would defeat the imported-while-loading case)."""
    import sglang

    relative = Path(*module.split(".")[1:]).with_suffix(".py")
    (path,) = [
        Path(root) / relative for root in sglang.__path__ if (Path(root) / relative).is_file()
    ]
    return REJECTION.search(path.read_text(encoding="utf-8")) is not None


def our_targets(scheduler: bool) -> dict[str, list[str]]:
    """Every target our plugin hooks on this release (as this process is configured), with
    the names of our hooks on it; read off SGLang by feature before plugins load."""
    from sglang_nvfp4_patches.gemma4_attention import rule_state as root_cause
    from sglang_nvfp4_patches.llama4_router_weight.rule import REJECTING_METHODS, RUNNER_MODULE
    from sglang_nvfp4_patches.post_import import module_exists

    targets: dict[str, list[str]] = {}
    if module_exists(RUNNER_MODULE):
        for rejecting in REJECTING_METHODS:
            if still_rejects(rejecting.module):
                targets[rejecting.target] = ["create_moe_runner_hook"]
    # Before 0.5.15 model defaults live in this method; later in a registry.
    registries = ("model_override_base", "overrides")
    no_registry = not any(
        importlib.util.find_spec(f"sglang.srt.arg_groups.{n}") for n in registries
    )
    if no_registry:  # the server-args seam there: one hook for every patch's question
        targets[ADJUSTMENTS] = ["adjustments_hook"]
    forced = "gemma4-attention" in os.environ.get("SGLANG_NVFP4_PATCHES_FORCE", "")
    if scheduler and (forced or root_cause.kv_scale_verdict().bug_live):
        targets[SCHEDULER_INIT] = ["scheduler_init_hook"]
    return targets


def our_hook(name: str) -> object:
    from sglang_nvfp4_patches.llama4_router_weight import method_lift
    from sglang_nvfp4_patches.server_args_seam import hooks

    for module in (method_lift, hooks):
        if hasattr(module, name):
            return getattr(module, name)
    raise LookupError(name)


def call_once(target: str) -> None:
    """Call what is bound at ``target`` once, as SGLang would (errors from the stand-in
    arguments after the hooks ran are expected)."""
    from sglang_nvfp4_patches.sglang_hooks import bound_at

    if target == ADJUSTMENTS:  # a real ServerArgs: its __post_init__ calls the method once
        from sglang_nvfp4_patches.simulation.bundled import EXAMPLES_DIR
        from sglang_nvfp4_patches.simulation.gpus import GPU_PROFILES, simulated_gpu
        from sglang_nvfp4_patches.simulation.server_args import resolved_server_args

        with simulated_gpu(GPU_PROFILES["sm100"]):
            resolved_server_args(EXAMPLES_DIR / "gemma-4-26b-a4b-nvfp4")
        return
    receiver = object.__new__(pkgutil.resolve_name(target.rsplit(".", 1)[0]))
    with contextlib.suppress(Exception):
        bound_at(target)(receiver, SimpleNamespace(), SimpleNamespace())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--neighbour", choices=("first", "last"), required=True)
    parser.add_argument("--import-first", action="store_true")
    parser.add_argument(
        "--no-scheduler", action="store_true", help="a release whose scheduler needs a GPU"
    )
    args = parser.parse_args()

    targets = our_targets(scheduler=not args.no_scheduler)
    os.environ["SGLANG_NVFP4_TEST_NEIGHBOUR_TARGETS"] = ",".join(targets)
    if args.neighbour == "first":
        sys.path.insert(0, str(NEIGHBOUR_DIR))
    else:
        sys.path.append(str(NEIGHBOUR_DIR))
    if args.import_first:
        for target in targets:
            importlib.import_module(target.rsplit(".", 2)[0])

    from sglang.srt.plugins import load_plugins

    load_plugins()
    import nvfp4_test_neighbour as neighbour

    from sglang_nvfp4_patches.sglang_hooks import bound_at, hook_count

    state = {}
    for target, hook_names in targets.items():
        bound = bound_at(target)
        ours = {hook_count(bound, our_hook(name)) for name in hook_names}
        wired = {
            "ours": ours.pop() if len(ours) == 1 else sorted(ours),  # each of ours: once
            "neighbour": hook_count(bound, neighbour.HOOKS[target]),
        }
        call_once(target)
        state[target] = {**wired, "neighbour_calls": neighbour.CALLS.get(target, 0)}
    print("STATE " + json.dumps(state))


if __name__ == "__main__":
    main()
