"""Install ``gemma4-attention`` where its root cause is live (the declaration's ``install``).

It follows its root cause, which :mod:`.backend_source` reads off this SGLang's TRT-LLM MHA
backend at plugin load (:func:`.backend_source.mode_for` decides):

* fixed (which releases: docs/releases.md): nothing is installed; SGLang's faster
  ``trtllm_mha`` default stands.
* live (on the releases before sglang#28144, and nightlies with it reverted) or forced with
  ``SGLANG_NVFP4_PATCHES_FORCE=gemma4-attention``: the rule is wired into whichever layout
  holds the Gemma 4 default (:mod:`.layout`), and the scheduler checks records resolved
  before plugins loaded (:mod:`.launch_paths`).
"""

from __future__ import annotations

from sglang_nvfp4_patches.gemma4_attention import backend_source
from sglang_nvfp4_patches.gemma4_attention.layout import find_layout
from sglang_nvfp4_patches.gemma4_attention.read_back import (
    already_upstream,
    current_state,
    unpatched_report,
)
from sglang_nvfp4_patches.gemma4_attention.rule import Gemma4Mode
from sglang_nvfp4_patches.gemma4_attention.rule_state import set_mode
from sglang_nvfp4_patches.status import PatchReport


def install(forced: bool, observe: bool) -> PatchReport:
    """Wire the rule in where its root cause is live (or it is forced); idempotent.
    ``observe``: wire nothing, say whether the root cause is live."""
    if observe:
        return unpatched_report()
    mode = backend_source.mode_for(forced)
    set_mode(mode)
    if mode is Gemma4Mode.FIXED:
        return already_upstream()
    layout = find_layout()
    if not layout.installed():
        from sglang_nvfp4_patches.gemma4_attention import launch_paths
        from sglang_nvfp4_patches.post_import import when_imported

        layout.install()
        when_imported(launch_paths.SCHEDULER_MODULE, launch_paths.hook_scheduler)
    return current_state()
