"""The CPU simulation that ``explain``, ``doctor`` and the tests share: the real SGLang, with
only what needs a GPU stood in for.

* :mod:`.gpus`: the simulated GPUs (pure profiles) and SGLang made to believe in one;
* :mod:`.server_args`: SGLang's own server-args resolution, and a quiet-SGLang context;
* :mod:`.moe_layer`: a scheduler's published config and a MoE layer built as ``FusedMoE``
  builds it;
* :mod:`.bundled`: the stand-in checkpoint configs shipped with the package.
"""
