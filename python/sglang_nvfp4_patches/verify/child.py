"""One fresh process of ``verify`` (``python -m ... PATCH OUT``): load the plugin as SGLang
does, run one patch's checks, write their results and the SGLang imported as JSON to OUT. Where
SGLang cannot be imported, the last stderr line says why (exit ``EXIT_ENVIRONMENT``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from sglang_nvfp4_patches.check_result import CheckResult, Outcome
from sglang_nvfp4_patches.errors import EXIT_ENVIRONMENT, environment_cause
from sglang_nvfp4_patches.patches import PATCHES


def main(name: str, out: Path) -> None:
    import sglang
    from sglang.srt.plugins import load_plugins

    from sglang_nvfp4_patches.this_process import reports

    load_plugins()
    if reports():
        (patch,) = (patch for patch in PATCHES if patch.name == name)
        results = patch.verify_checks()
    else:
        why = (
            "SGLang did not load the plugin in a fresh process (is SGLANG_PLUGINS excluding "
            "nvfp4_patches?); nothing can be verified"
        )
        results = [CheckResult("sglang-nvfp4-patches", "plugin loaded", Outcome.NOT_RUN, why)]
    # The SGLang imported here (an overlay on PYTHONPATH may differ from the package metadata).
    imported = {"version": str(getattr(sglang, "__version__", "unknown")), "file": sglang.__file__}
    document = {"sglang": imported, "results": [result.as_dict() for result in results]}
    out.write_text(json.dumps(document), encoding="utf-8")


if __name__ == "__main__":
    try:
        main(sys.argv[1], Path(sys.argv[2]))
    except Exception as error:
        cause = environment_cause(error)
        if cause is None:
            raise
        print(f"SGLang cannot be imported here: {cause}", file=sys.stderr)
        sys.exit(EXIT_ENVIRONMENT)
