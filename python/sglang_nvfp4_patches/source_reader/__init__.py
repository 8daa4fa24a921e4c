"""Reading SGLang's source to answer a patch's question about it (pure: ``ast`` and
``inspect`` only; it imports nothing of SGLang).

One walker (:mod:`.walker`), one question (a :class:`.flow_state.FlowQuestion`):
``llama4_router_weight.flag_question`` reads live functions (:mod:`.live_code`); a module's text
(:mod:`.module_code`) was read by Gemma 4's question, since dropped. Beside it: :mod:`.values`,
:mod:`.flow_state`, :mod:`.binding`, :mod:`.syntax`, :mod:`.call_graph`.
"""
