"""``edited_backend_cli.py COPY_DIR ARGS...``: ``python -m sglang_nvfp4_patches ARGS`` in a
process whose SGLang keeps its TRT-LLM MHA backend in the edited copy ``COPY_DIR`` built by
``bug_window.make_bug_window_copy``.

The copy's ``sglang`` goes first on ``sglang.__path__``, so ``sglang.srt.__path__`` (a
namespace path computed from it), the very list the probe searches, starts with the copy's
``srt`` as it would with the copy first on ``PYTHONPATH``; submodules not yet imported then
load from the copy, which links every other file to the installed one. This lets a child of
the fork server (SGLang already imported) stand in for a fresh interpreter with the copy on
``PYTHONPATH``.
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import sglang

if __name__ == "__main__":
    copy, *arguments = sys.argv[1:]
    sglang.__path__.insert(0, str(Path(copy) / "sglang"))
    sys.argv = ["sglang_nvfp4_patches", *arguments]
    runpy.run_module("sglang_nvfp4_patches", run_name="__main__", alter_sys=True)
