"""Run in a fresh interpreter: load plugins the way SGLang does, then print what SGLang holds.

No test monkeypatching: this reads SGLang's own registries and classes after
``sglang.srt.plugins.load_plugins()``. ``--load-times N`` calls the loader N times,
``--register-times N`` calls our ``register`` N more times, and ``--without MODULE:NAME``
(or ``MODULE:Class.NAME``) deletes one SGLang attribute first, standing in for a release that
lacks it (a missing seam: the fail-safe path). ``--no-llama4-record`` hides the release facts
of ``llama4-router-weight`` (shipped and local), standing in for a release nobody verified:
nothing shows SGLang's runner pre-scaling, the path where the plugin wraps it.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
from collections.abc import Callable
from typing import Any


def refusal_of(fused_func: Callable[..., Any]) -> str:
    """What a registered fused function raises for Llama 4's flag with top-2 routing: the
    refusal comes before any kernel call, so nothing GPU-bound runs."""
    import torch
    from sglang.srt.layers.moe.token_dispatcher.standard import StandardDispatchOutput
    from sglang.srt.layers.moe.topk import StandardTopKOutput

    from sglang_nvfp4_patches.simulation.llama4_layers import llama4_runner_config

    topk = StandardTopKOutput(
        topk_weights=torch.ones(2, 2),
        topk_ids=torch.zeros(2, 2, dtype=torch.int32),
        router_logits=torch.zeros(2, 4),
    )
    dispatch = StandardDispatchOutput(
        hidden_states=torch.ones(2, 64), hidden_states_scale=None, topk_output=topk
    )
    try:
        fused_func(dispatch, None, llama4_runner_config(4, 64, 32, top_k=2))
    except Exception as error:
        return type(error).__name__
    return "nothing"


def _runner_upstream() -> bool:
    """Whether the runner part stood down: a record shows SGLang's own runner pre-scaling."""
    from sglang_nvfp4_patches.llama4_router_weight import outcomes
    from sglang_nvfp4_patches.llama4_router_weight.rule import Part
    from sglang_nvfp4_patches.patch_report import PatchState

    runner = outcomes.recorded().get(Part.RUNNER)
    return runner is not None and runner.state is PatchState.ALREADY_UPSTREAM


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--load-times", type=int, default=1)
    parser.add_argument("--register-times", type=int, default=0, help="extra direct calls")
    parser.add_argument("--without", help="module:attribute to delete before loading")
    parser.add_argument("--no-llama4-record", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO)
    if args.no_llama4_record:
        from sglang_nvfp4_patches.llama4_router_weight import evidence

        evidence.current_facts = lambda: None
    if args.without:
        importlib.import_module("sglang.srt.server_args")  # SGLang's own imports come first
        module_name, attribute = args.without.split(":")
        *owners, name = attribute.split(".")  # MODULE:Class.attribute deletes a class's
        owner = importlib.import_module(module_name)
        for part in owners:
            owner = getattr(owner, part)
        delattr(owner, name)

    from sglang.srt.plugins import load_plugins

    for _ in range(args.load_times):
        load_plugins()
    for _ in range(args.register_times):
        from sglang_nvfp4_patches.plugin import register

        register()

    from sglang_nvfp4_patches.gemma4_attention import NAME
    from sglang_nvfp4_patches.llama4_router_weight.rule import RUNNER_MODULE
    from sglang_nvfp4_patches.models import GEMMA4_ARCHITECTURES
    from sglang_nvfp4_patches.patch_report import PatchUnavailable
    from sglang_nvfp4_patches.post_import import module_exists
    from sglang_nvfp4_patches.server_args_seam import hooks
    from sglang_nvfp4_patches.server_args_seam.seam import SeamKind, find_override_seam
    from sglang_nvfp4_patches.sglang_hooks import PATCHED_MARK
    from sglang_nvfp4_patches.supported_releases import sglang_version

    try:
        asked = hooks.times_asked(NAME)
        seam = find_override_seam()
    except PatchUnavailable:  # the --without case: nothing to count
        asked, seam = 0, None
    counts = dict.fromkeys(GEMMA4_ARCHITECTURES, asked)
    if seam is not None and seam.kind is not SeamKind.ADJUSTMENTS_METHOD:  # a registry
        # the seam's provider runs after every provider keyed by an architecture: is it last?
        predicates = seam.module._PREDICATE_OVERRIDE_FNS
        last = asked == 1 and predicates[-1][1] is hooks.registry_provider
    else:  # the ServerArgs method hook: SGLang's HookRegistry wraps it once
        last = asked == 1
    state = {
        "sglang": sglang_version(),
        "gemma4_provider_count": counts,
        "gemma4_provider_last": last,
    }
    # What SGLang does when it builds a MoE layer: import the runner and ModelOpt modules.
    state["runner_module"] = module_exists(RUNNER_MODULE)
    if not state["runner_module"]:  # 0.5.14 and older
        print("STATE " + json.dumps(state))
        return
    runner = importlib.import_module("sglang.srt.layers.moe.moe_runner.flashinfer_cutlass")
    modelopt = importlib.import_module("sglang.srt.layers.quantization.modelopt_quant")
    from sglang.srt.layers.moe.moe_runner.base import FusedOpPool

    create = modelopt.ModelOptNvFp4FusedMoEMethod.__dict__["create_moe_runner"]
    funcs = FusedOpPool._fused_funcs
    own = {
        ("none", "flashinfer_cutlass"): runner.fused_experts_none_to_flashinfer_cutlass,
        ("flashinfer", "flashinfer_cutlass"): runner.fused_experts_flashinfer_to_flashinfer_cutlass,
    }
    state.update(
        {
            "runner_funcs_are_sglangs_own": all(funcs[k] is f for k, f in own.items()),
            "runner_funcs_wrap_sglangs_own": all(
                getattr(funcs[k], "__wrapped__", None) is f for k, f in own.items()
            ),
            "runner_funcs_refuse_top2_with": sorted({refusal_of(funcs[k]) for k in own}),
            "runner_funcs_patched": all(
                getattr(funcs[k], PATCHED_MARK, False)
                for k in (("none", "flashinfer_cutlass"), ("flashinfer", "flashinfer_cutlass"))
            ),
            "runner_prescale_upstream": _runner_upstream(),
            "modelopt_create_moe_runner_hooked": hasattr(create, "__wrapped__"),
        }
    )
    print("STATE " + json.dumps(state))


if __name__ == "__main__":
    main()
