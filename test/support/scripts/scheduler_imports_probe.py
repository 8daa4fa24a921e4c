"""Run as a fork-server child: which of the given modules this process had imported, then
which it has after importing SGLang's scheduler module, as a scheduler process does before
it loads plugins; one ``RESULT`` line of JSON."""

from __future__ import annotations

import importlib
import json
import sys


def main(modules: list[str]) -> None:
    before = [name for name in modules if name in sys.modules]
    importlib.import_module("sglang.srt.managers.scheduler")
    after = [name for name in modules if name in sys.modules]
    ours = sorted(m for m in sys.modules if m.split(".")[0] == "sglang_nvfp4_patches")
    print("RESULT " + json.dumps({"before": before, "after": after, "ours": ours}))


if __name__ == "__main__":
    main(sys.argv[1:])
