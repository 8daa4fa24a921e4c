"""Facts about the releases the suite runs on (the release itself is
``sglang_nvfp4_patches.supported_releases.sglang_version()``: an overlay on PYTHONPATH wins)."""

from __future__ import annotations

from packaging.version import Version

from sglang_nvfp4_patches.llama4_router_weight.rule import Part
from sglang_nvfp4_patches.supported_releases import sglang_version

# The first SGLang release that ships each feature a test expects by release, where the test
# cannot read the feature itself (one it can read, such as ``ServerArgs.resolve_once``, it
# reads). CI runs every release of the window (test/unit/test_release_facts.py checks that each
# boundary and the tested release before it are both run), so a wrong boundary fails on the
# release between.
KV_SCALES_APPLIED = "0.5.14"  # sglang#28144 (cherry-picked, #29245): trtllm_mha applies them
RUNNER_PRESCALE = "0.5.21"  # the CUTLASS runner's own _prescale_router_weight_on_input (#35504)
# ModelOptNvFp4FusedMoEMethod.apply stops falling back to SGLang's own CUTLASS FP4 kernel and
# serves the runner create_moe_runner built (auto: FLASHINFER_TRTLLM), whose weights its
# processing never prepared: NotImplementedError (0.5.16-0.5.20), AttributeError (0.5.21+).
MOE_RUNNER_MISMATCH = "0.5.16"
BOUNDARIES = (KV_SCALES_APPLIED, RUNNER_PRESCALE, MOE_RUNNER_MISMATCH)


def ships(first_release: str) -> bool:
    """Whether the SGLang under test is ``first_release`` or newer."""
    return Version(sglang_version()) >= Version(first_release)


# The releases whose scheduler and engine modules cannot be imported on this CPU machine: they
# load sgl_kernel ops at import time, and their overlay runs on the primary environment's
# sgl_kernel, whose common_ops needs libcuda (README: overlays). Only there is this an expected
# gap; on any other release the same failure fails the test.
NO_CPU_KERNEL_RELEASES = ("0.5.12", "0.5.12.post1")


def recorded_llama4_state(part: Part) -> str | None:
    """The state the ``llama4-router-weight`` record for this SGLang gives ``part`` (``None``:
    no record, or nothing of that part)."""
    from sglang_nvfp4_patches.llama4_router_weight.evidence import current_facts

    facts = current_facts()
    shown = None if facts is None else facts.shown.get(part)
    return None if shown is None else shown.value


def shipped_llama4_serving(part: Part) -> list[str]:
    """The releases whose shipped release-facts row shows ``part``'s layer serving (SGLang's
    own, or lifted), oldest first: the table read here, on its own."""
    from sglang_nvfp4_patches.release_facts import SHIPPED

    lines = [line.split() for line in SHIPPED.read_text().splitlines() if line[:1] not in "#"]
    column = lines[0].index(part.value)
    found = [words[0] for words in lines[1:] if words[column] in ("upstream", "lift-serves")]
    return sorted(found, key=Version)
