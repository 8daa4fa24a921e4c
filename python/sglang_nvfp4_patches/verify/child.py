"""One fresh process of ``verify``: load the plugin as SGLang does, run one patch's checks
(its declaration's ``verify_checks``), write their results as JSON to the path given
(``python -m ... PATCH OUT``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from sglang_nvfp4_patches.patches import PATCHES
from sglang_nvfp4_patches.verify.result import CheckResult, Outcome


def _plugin_loaded() -> CheckResult | None:
    from sglang.srt.plugins import load_plugins

    from sglang_nvfp4_patches.process_record import reports

    load_plugins()
    if reports():
        return None
    return CheckResult(
        "sglang-nvfp4-patches",
        "plugin loaded",
        Outcome.FAILED,
        "SGLang did not load the plugin in a fresh process (is SGLANG_PLUGINS excluding "
        "nvfp4_patches?); nothing can be verified",
    )


def main(name: str, out: Path) -> None:
    problem = _plugin_loaded()
    if problem is not None:
        results = [problem]
    else:
        (patch,) = (patch for patch in PATCHES if patch.name == name)
        results = patch.verify_checks()
    out.write_text(json.dumps([result.as_dict() for result in results]), encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
