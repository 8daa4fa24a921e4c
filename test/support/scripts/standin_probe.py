"""Run in a fresh interpreter: ``doctor --json``, ``explain --json`` and ``verify --json`` as a
user runs them, with a stand-in third patch (``standin/``) added to ``PATCHES`` and nothing
else changed. Prints ``RESULT {command: {"exit": N, "stdout": ...}}``.

``verify``'s check processes are fresh interpreters started by ``verify`` itself; they get
the stand-in through ``standin/sitecustomize.py``, on the ``PYTHONPATH`` they inherit.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from pathlib import Path

STANDIN = Path(__file__).resolve().parent / "standin"


def main() -> None:
    sys.path.insert(0, str(STANDIN))
    inherited = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([str(STANDIN), *([inherited] if inherited else [])])
    import standin_added  # noqa: F401  # before anything of the plugin reads PATCHES

    from sglang_nvfp4_patches.cli import main as cli
    from sglang_nvfp4_patches.simulation.bundled import GEMMA4_NVFP4_MOE

    def run(*argv: str) -> dict[str, object]:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = cli(list(argv))
        return {"exit": code, "stdout": out.getvalue()}

    result = {
        "doctor": run("doctor", "--json"),
        "explain": run("explain", "--json", "--gpu", "sm100", "--model", str(GEMMA4_NVFP4_MOE)),
        "verify": run("verify", "--json"),
    }
    print("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main()
