"""Reading SGLang's source to answer a patch's question about it (pure: ``ast`` and
``inspect`` only; it imports nothing of SGLang).

One walker (:mod:`.walker`), one question per patch (a :class:`.flow_state.FlowQuestion`):
``gemma4_attention.v_scale_question`` reads a module's text (:mod:`.module_code`),
``llama4_router_weight.flag_question`` live functions (:mod:`.live_code`). Beside it:
:mod:`.values`, :mod:`.flow_state`, :mod:`.binding`, :mod:`.syntax`, :mod:`.call_graph`.
"""
