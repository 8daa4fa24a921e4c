"""SGLang plugin fixing three NVFP4-on-Blackwell serving bugs without a fork: the Gemma 4 NVFP4
MoE attention default on SM10X (``gemma4-attention``), the Llama 4 router weight on FlashInfer's
CUTLASS MoE runner (``llama4-router-weight``) and the runner a ModelOpt NVFP4 MoE layer gets with
no flags (``nvfp4-moe-runner``).

SGLang loads it through the ``sglang.srt.plugins`` entry point (``plugin.register``).
"""

__version__ = "0.1.0"
