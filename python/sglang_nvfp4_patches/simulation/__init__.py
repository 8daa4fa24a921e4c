"""The CPU simulation that ``explain``, ``doctor``, ``verify`` and the tests share: the real
SGLang, with only what needs a GPU stood in for: the GPUs (:mod:`.gpus`), the server-args
resolution (:mod:`.server_args`), a scheduler's MoE state (:mod:`.scheduler`), the models' MoE
layers (:mod:`.moe_models`, :mod:`.llama4_layers`), a layer's forward (:mod:`.moe_forward`,
across ranks: :mod:`.ranks`), the kernel stand-ins (:mod:`.cutlass_kernel`,
:mod:`.uncomputed_kernels`), :mod:`.patching` and the bundled configs (:mod:`.bundled`).
"""
