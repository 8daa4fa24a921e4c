"""Small ``trtllm_mha_backend.py``-shaped sources for the root-cause probe, and how its verdict
names one of their lines."""

from __future__ import annotations

import textwrap

from sglang_nvfp4_patches.gemma4_attention.v_scale_question import (
    KvScaleVerdict,
    analyse_backend_source,
)

SINK = "trtllm_batch_decode_with_kv_cache"

# One decode method; {body} is indented into it.
FORWARD = """
import torch
from flashinfer.decode import trtllm_batch_decode_with_kv_cache

class Backend:
    def forward_decode(self, q, layer):
{body}
"""


def forward(body: str) -> str:
    """``FORWARD`` with ``body`` (written at column 0) as the decode method's body."""
    return textwrap.dedent(FORWARD).format(body=textwrap.indent(textwrap.dedent(body), " " * 8))


def verdict_of(source: str) -> KvScaleVerdict:
    return analyse_backend_source(textwrap.dedent(source))


def line_of(source: str, text: str) -> int:
    """The number of the one line of ``source`` that reads ``text`` (stripped)."""
    (number,) = [i for i, line in enumerate(source.splitlines(), 1) if line.strip() == text]
    return number


def named(source: str, text: str, note: str = "", owner: str = "") -> str:
    """How the evidence names that line: `text` (note) l.N in owner()."""
    shown = f"`{text}`" + (f" ({note})" if note else "") + f" l.{line_of(source, text)}"
    return shown + (f" in {owner}()" if owner else "")
