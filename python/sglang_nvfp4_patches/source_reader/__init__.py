"""Reading SGLang's source to answer a patch's question about it (pure: ``ast`` and
``inspect`` only; it imports nothing of SGLang).

One reader, two readings, each question a small module in its patch's package:

* the **value-flow** reading (:mod:`.value_flow`) of a module's source text, never imported:
  where the argument a call is handed can come from (``gemma4_attention.v_scale_question``:
  does the FP8 KV-cache V scale reach ``bmm2_scale``?);
* the **guard** reading (:mod:`.guard_reader`) of live functions: what a function does with a
  flag it reads (``llama4_router_weight.rejection_question``: does an NVFP4 MoE method reject
  ``apply_router_weight_on_input`` on the CUTLASS runner?).

Shared by both: :mod:`.syntax` (names of nodes), :mod:`.sources` (a function's source, from a
module's text or a live object), :mod:`.binding` (which parameter each argument meets). Each
reading's state sits beside it (:mod:`.values`, :mod:`.flow_state`, :mod:`.call_graph`;
:mod:`.frame`); the walk of one node stays in its reading's one class.
Both answer "unknown" for what they cannot follow.
"""
