"""``explain``: what SGLang picks for a checkpoint on a GPU, unpatched vs patched (CPU only).

* :mod:`.input`: the user's ``--model``, its config and every file SGLang reads beside it,
  checked before SGLang is imported (pure);
* :mod:`.run`: SGLang's own parser for the server flags, then one resolution per model x GPU
  on the CPU simulation (:mod:`sglang_nvfp4_patches.simulation`), unpatched and patched, and
  what the patches of the row's architecture say of it (their ``explain_note``);
* :mod:`.layer`: the row's first MoE layer run once patched and once as SGLang ships it (for
  a layer refused where another runner may serve it, the runner choices that do);
* :mod:`.table`: the rows, their notes, the table and the JSON.
"""
