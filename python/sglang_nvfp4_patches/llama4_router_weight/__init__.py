"""Patch ``llama4-router-weight``: Llama 4's router weight on the FlashInfer CUTLASS MoE runner.

Llama 4 builds its MoE with ``apply_router_weight_on_input=True``; the CUTLASS kernel only
scales expert outputs. For top-1 routing, pre-scaling the activations by the router weight
(:mod:`.prescale`) is exact. One pure function decides everything, from the release facts and
the layer being built: :func:`.rule.decide` (the runner gets our pre-scale or not, each method's
check lifted or not, the layer refused or not). Seams carrying it out: :mod:`.runner_registry`,
:mod:`.method_lift`; commands: :mod:`.commands` (``install``, ``doctor``, ``explain``),
:mod:`.checks` (``verify``); the rest: docs/code-map.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sglang_nvfp4_patches.llama4_router_weight import commands, outcomes, refusals
from sglang_nvfp4_patches.llama4_router_weight.rule import NAME
from sglang_nvfp4_patches.models import LLAMA4_ARCHITECTURES
from sglang_nvfp4_patches.patch import Patch

if TYPE_CHECKING:
    from sglang_nvfp4_patches.check_result import CheckResult


def verify_checks() -> list[CheckResult]:
    from sglang_nvfp4_patches.llama4_router_weight.checks import run_checks  # the simulation

    return run_checks()


def release_facts() -> dict[str, str]:
    from sglang_nvfp4_patches.llama4_router_weight import evidence  # the simulation
    from sglang_nvfp4_patches.simulation.server_args import quiet_sglang

    with quiet_sglang():
        return evidence.cells(evidence.gather())


PATCH = Patch(
    NAME,
    LLAMA4_ARCHITECTURES,
    commands.install,
    commands.current_state,
    commands.unpatched_report,
    commands.explain_note,
    verify_checks,
    release_facts,
    outcomes.suspended,  # explain's unpatched column
    refusals.another_runner_may_serve,
    not_forceable_because=(
        "where SGLang pre-scales the router weight itself, a forced pre-scale would apply it twice"
    ),
)
