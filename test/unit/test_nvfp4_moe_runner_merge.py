"""How ``nvfp4-moe-runner``'s evidence keeps one fact per MoE layer settings key when several
stand-ins share it (pure: the facts as the simulation reports them)."""

from __future__ import annotations

from typing import Any

from sglang_nvfp4_patches.nvfp4_moe_runner.evidence import merged


def fact(state: str, published: str = "auto") -> dict[str, Any]:
    return {"state": state, "published": published}


def test_a_run_layer_is_kept_over_a_stand_in_whose_override_publishes_a_runner() -> None:
    override = merged("Qwen3", fact("not affected", "flashinfer_trtllm"), None, "auto")
    assert override["state"] == "not covered"
    kept = merged("Mixtral", fact("live"), override, "auto")
    assert (kept["state"], kept["stand_in"]) == ("live", "Mixtral")
    again = merged("Qwen3", fact("not affected", "flashinfer_trtllm"), kept, "auto")
    assert again == kept  # an unrun layer never replaces a run one


def test_what_sglang_publishes_for_the_control_is_every_architectures() -> None:
    general = merged(
        "Qwen3", fact("not affected", "flashinfer_cutlass"), None, "flashinfer_cutlass"
    )
    assert general["state"] == "not affected"


def test_run_layers_that_disagree_are_unknown() -> None:
    first = merged("Qwen3", fact("live"), None, "auto")
    both = merged("Mixtral", fact("upstream"), first, "auto")
    assert both["state"] == "unknown"
    same = merged("Mixtral", fact("live"), first, "auto")
    assert same == first
