"""The CPU simulation that ``explain``, ``doctor``, ``verify`` and the tests share: the real
SGLang, with only what needs a GPU stood in for.

* :mod:`.gpus`: the simulated GPUs (pure profiles) and SGLang made to believe in one;
* :mod:`.server_args`: SGLang's own server-args resolution, and a quiet-SGLang context;
* :mod:`.moe_layer`, :mod:`.scheduler`: a scheduler's published config, its MoE settings
  and placement, and a bare layer's runner config;
* :mod:`.moe_models`: how Llama 4 and Gemma 4 build their MoE layer, from a config (pure);
* :mod:`.moe_forward`: a checkpoint's first MoE layer built by SGLang's ``FusedMoE``, loaded,
  processed and run once, and what that shows (:class:`.moe_forward.LayerVerdict`);
* :mod:`.cutlass_kernel`, :mod:`.uncomputed_kernels`: the kernel stand-ins (FlashInfer's
  CUTLASS MoE computed by our reference; the others only say they were reached);
* :mod:`.llama4_layers`: the Llama 4 layers of ``llama4-router-weight``'s checks;
* :mod:`.patching`: setting and restoring what the simulation replaces;
* :mod:`.bundled`: the stand-in checkpoint configs shipped with the package.
"""
