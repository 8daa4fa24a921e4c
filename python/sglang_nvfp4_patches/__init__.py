"""SGLang plugin fixing two NVFP4-on-Blackwell serving bugs without a fork.

SGLang loads it through the ``sglang.srt.plugins`` entry point (``plugin.register``).
"""

__version__ = "0.1.0"
