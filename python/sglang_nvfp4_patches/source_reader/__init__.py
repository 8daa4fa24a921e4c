"""Reading SGLang's source to answer a patch's question about it (pure: ``ast`` and
``inspect`` only; it imports nothing of SGLang).

One walker (:mod:`.walker`), one question per patch, each a small module in its patch's
package (a :class:`.flow_state.Question`):

* ``gemma4_attention.v_scale_question``: does the FP8 KV-cache V scale reach ``bmm2_scale``?
  Read off a module's text, never imported (:mod:`.module_code`);
* ``llama4_router_weight.flag_question``: does an NVFP4 MoE method reject
  ``apply_router_weight_on_input`` on the CUTLASS runner? Read off live functions
  (:mod:`.live_code`).

Beside the walker: what a value can come from (:mod:`.values`), its state and the question's
hooks (:mod:`.flow_state`), which parameter each argument meets (:mod:`.binding`), names of
nodes (:mod:`.syntax`), where a module's walk starts (:mod:`.call_graph`). The walk of one
node stays in the walker's one class; what it cannot follow is "unknown" to a question.
"""
