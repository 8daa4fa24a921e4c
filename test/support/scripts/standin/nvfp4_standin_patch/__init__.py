"""A stand-in third patch: one package and its declaration, as a new patch would add them.

It concerns Gemma 4 (so it shares ``explain``'s Gemma 4 rows with ``gemma4-attention``),
patches nothing in SGLang, and says what each command asked of it, so a test can see that
``doctor``, ``explain`` and ``verify`` reach it through ``PATCHES`` alone.
"""

from __future__ import annotations

from sglang_nvfp4_patches.patch import declare

NAME = "standin-patch"
PATCH = declare(
    __name__,
    name=NAME,
    architectures=frozenset({"Gemma4ForConditionalGeneration"}),
    install="parts.install",
    state="parts.current_state",
    unpatched="parts.unpatched_report",
    explain_note="parts.explain_note",
    explain_layer="parts.layer_outcome",
    verify_checks="parts.run_checks",
)
