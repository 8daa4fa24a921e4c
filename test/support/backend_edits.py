"""Hand edits of the installed ``trtllm_mha_backend.py``, the way a nightly or a vendor build
could look: three that drop the FP8 V scale behind a call the probe must follow, one that
adds a constant ``bmm2_scale`` only where the KV cache is not FP8, and one whose V scale
comes from another module's object (unknown). Each takes the source
and returns it edited with the number of places changed (``bug_window.make_bug_window_copy``
builds the tree around it)."""

from __future__ import annotations

import re

# sglang#28144's helper ends `return q_scale * k_scale * layer.scaling, v_scale`.
_HELPER_RETURN = re.compile(r"^(?P<head>[ \t]*return [^\n]*scaling), v_scale[ \t]*$", re.M)
_V_SCALE_READ = re.compile(
    r"^(?P<indent>[ \t]*)v_scale = self\._get_scalar_scale\([^\n]*\)[ \t]*$", re.M
)
_HELPER_CALL = re.compile(
    r"^(?P<indent>[ \t]*)bmm1_scale, bmm2_scale = self\._get_bmm_scales\([^\n]*\)[ \t]*\n", re.M
)
_FIRST_DEFINITION = re.compile(r"^(?=@|class |def )", re.M)  # after the imports
_DECODE = re.compile(r"^    def forward_decode\(", re.M)

BF16_ONLY_METHOD = '''    def forward_decode_bf16_kv(self, q, layer, forward_batch):
        """A BF16 KV cache only: its values need no descale."""
        if self.data_type == torch.float8_e4m3fn:
            raise ValueError("forward_decode_bf16_kv needs a BF16 KV cache")
        k_cache, v_cache = self.token_to_kv_pool.get_kv_buffer(layer.layer_id)
        return flashinfer.decode.trtllm_batch_decode_with_kv_cache(
            query=q,
            kv_cache=(k_cache, v_cache),
            workspace_buffer=self.workspace_buffer,
            block_tables=self.forward_metadata.page_table,
            seq_lens=self.forward_metadata.cache_seqlens_int32,
            max_seq_len=self.max_context_len,
            bmm1_scale=layer.scaling,
            bmm2_scale=1.0,
        )

'''


def helper_returns_unit_bmm2(source: str) -> tuple[str, int]:
    """The FP8 branch of the BMM-scale helper returns ``1.0`` for bmm2."""
    return _HELPER_RETURN.subn(r"\g<head>, 1.0", source)


def v_scale_is_a_module_constant(source: str) -> tuple[str, int]:
    """The V scale is replaced by ``_UNIT_SCALE``, a module-level ``1.0``."""
    edited, count = _V_SCALE_READ.subn(r"\g<indent>v_scale = _UNIT_SCALE", source)
    if count:
        edited, _ = _FIRST_DEFINITION.subn("_UNIT_SCALE = 1.0\n\n\n", edited, count=1)
    return edited, count


def call_sites_override_bmm2(source: str) -> tuple[str, int]:
    """Each call site overrides the helper's bmm2 with ``float(1)``."""
    return _HELPER_CALL.subn(r"\g<0>\g<indent>bmm2_scale = float(1)\n", source)


def v_scale_from_another_module(source: str) -> tuple[str, int]:
    """The V scale comes from a method of another module's object: nothing to follow."""
    return _V_SCALE_READ.subn(
        r"\g<indent>v_scale = self.kv_cache_quant_method.scale_for(layer)", source
    )


def adds_a_bf16_only_method(source: str) -> tuple[str, int]:
    """A new method passes ``bmm2_scale=1.0``, and refuses an FP8 KV cache first."""
    return _DECODE.subn(BF16_ONLY_METHOD + "    def forward_decode(", source, count=1)


# name -> (edit, what the probe must say, what explain --gpu sm100 then picks and who decided)
EDITS = {
    "helper returns 1.0": (helper_returns_unit_bmm2, "dropped", "triton", "gemma4-attention"),
    "module constant": (v_scale_is_a_module_constant, "dropped", "triton", "gemma4-attention"),
    "call-site float(1)": (call_sites_override_bmm2, "dropped", "triton", "gemma4-attention"),
    "BF16-only method": (adds_a_bf16_only_method, "applied", "trtllm_mha", "sglang"),
    "V scale from elsewhere": (
        v_scale_from_another_module,
        "unknown",
        "triton",
        "gemma4-attention",
    ),
}
