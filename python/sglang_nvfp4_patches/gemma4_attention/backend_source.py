"""Is the root cause live in the installed SGLang? The release facts' ``gemma4:v-scale`` cell
for its sources, else its TRT-LLM MHA backend source read (what ``verify`` always does),
parsed, never imported (that would load FlashInfer at plugin load).
"""

from __future__ import annotations

import contextlib
import functools
import gc
from collections.abc import Iterator
from pathlib import Path

from sglang_nvfp4_patches.gemma4_attention.rule import Gemma4Mode, KvScaleHandoff, KvScaleVerdict

BACKEND_MODULE = "sglang.srt.layers.attention.trtllm_mha_backend"
_RELATIVE = Path("layers", "attention", "trtllm_mha_backend.py")
COLUMN = "gemma4:v-scale"  # the release facts' cell: the handoff's value


def backend_source_path() -> Path | None:
    """Where this SGLang keeps ``trtllm_mha_backend.py`` (an overlay's copy wins)."""
    import sglang.srt

    for root in sglang.srt.__path__:
        candidate = Path(root) / _RELATIVE
        if candidate.is_file():
            return candidate
    return None


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Parsing allocates ~20k objects, which would trigger a full collection of SGLang's heap
    (~0.5 s) inside ``load_plugins()``; paused, it happens on SGLang's own allocations."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@functools.cache
def kv_scale_verdict() -> KvScaleVerdict:
    """The root-cause verdict (once): the release facts' row, else the source read."""
    from sglang_nvfp4_patches.release_facts import current_row
    from sglang_nvfp4_patches.status import sglang_version

    row = current_row()
    cell = None if row is None else row.cell(COLUMN)
    if row is not None and cell is not None:
        handoff = KvScaleHandoff(cell)
        origin = row.origin(sglang_version())
        return KvScaleVerdict(handoff, f"{_RELATIVE.name}, FP8 KV-cache path: {cell}, {origin}")
    return read_verdict()


@functools.cache
def read_verdict() -> KvScaleVerdict:
    """The root-cause verdict read off this process's SGLang source (once)."""
    from sglang_nvfp4_patches.gemma4_attention.v_scale_question import analyse_backend_source

    path = backend_source_path()
    if path is None:
        return KvScaleVerdict(KvScaleHandoff.UNKNOWN, f"no {BACKEND_MODULE} in this SGLang")
    try:
        source = path.read_text(encoding="utf-8")
    except OSError as error:
        return KvScaleVerdict(KvScaleHandoff.UNKNOWN, f"cannot read {path}: {error}")
    with _collector_paused():
        return analyse_backend_source(source, filename=path.name)


def verdict_phrase(verdict: KvScaleVerdict) -> str:
    """How ``doctor`` and ``explain`` name a live verdict (unknown: the line not followed)."""
    if verdict.handoff is KvScaleHandoff.UNKNOWN:
        return (
            f"root cause unknown, counted as live: {verdict.evidence}; check the line, or "
            "measure with `accuracy ab`"
        )
    return f"root cause live, trtllm_mha drops the FP8 KV-cache V scale: {verdict.evidence}"


def mode_for(forced: bool) -> Gemma4Mode:
    if forced:
        return Gemma4Mode.FORCED
    return Gemma4Mode.LIVE if kv_scale_verdict().bug_live else Gemma4Mode.FIXED
