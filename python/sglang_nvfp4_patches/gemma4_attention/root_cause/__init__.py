"""Does SGLang's TRT-LLM MHA backend hand the FP8 KV-cache V scale to the kernel? (pure)

The root cause behind the ``gemma4-attention`` rule (sglang#26518): with an FP8 KV cache,
``trtllm_mha_backend.py`` called FlashInfer's TRT-LLM attention with ``bmm2_scale = 1.0``,
so the V scale of the FP8 cache never reached the second BMM and every output was off by it.
sglang#28144 (in 0.5.14) computes ``bmm2_scale`` from the layer's V scale instead.

The answer is read off the backend's source with :mod:`ast`, never by importing it (that
would load FlashInfer at plugin load) and never from a version string (nightlies between
May and June 2026 say 0.5.14 and still carry the old code). "Applied" needs positive
evidence: an abstract interpretation follows the ``bmm2_scale`` of every ``trtllm_batch_*``
call, on the FP8 KV-cache path only, back through locals, tuples, same-module helpers (called
with their actual arguments, closures included) and module or class names, to the layer's V
scale (``layer.v_scale``, ``getattr(layer, "v_scale_float")``; arithmetic on it allowed).
Branches a test on the KV-cache dtype keeps off FP8 are not walked; a private helper the
module calls is walked only from its callers, with their arguments.
A constant that reaches the kernel is the bug (a constant used only where a test on the V
scale says it is missing is a fallback, not a drop); anything the walk cannot follow is
"unknown", which counts as live.

The parts: :mod:`.values` (what a value can come from), :mod:`.heuristics` (the FP8 KV-cache
path and the SGLang and FlashInfer names the probe knows), :mod:`.walker` (the abstract
interpretation: its state in :mod:`.walk_state`, then :mod:`.walk_statements`,
:mod:`.walk_expressions` and :mod:`.walk_calls`), :mod:`.call_graph` (the functions it
starts from) and :mod:`.verdict`.
"""

from sglang_nvfp4_patches.gemma4_attention.root_cause.verdict import (
    KvScaleHandoff,
    KvScaleVerdict,
    analyse_backend_source,
)

__all__ = ["KvScaleHandoff", "KvScaleVerdict", "analyse_backend_source"]
