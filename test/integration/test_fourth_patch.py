"""A fourth patch is one package plus its line in ``patches.py``: a copy of the plugin gets a
small but complete patch (a question on a server-args field, its doctor state, explain note,
verify check and release-facts column), and nothing else of the copy changes. Every command
then covers it, run from the copy as SGLang loads it (the copy comes first on ``sys.path``)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from sglang_nvfp4_patches.release_facts import KEPT_NAME, parse
from support.configs import LLAMA4_NVFP4
from support.forkserver import json_lines, server

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "sglang_nvfp4_patches"
NAME = "demo-decode"
COLUMN = "demo:decode"
DEMO = '''"""Patch ``demo-decode``: Llama 4 decodes with the triton attention backend."""

from __future__ import annotations

from typing import Any

NAME = "demo-decode"

from sglang_nvfp4_patches.check_result import CheckResult, run_check  # noqa: E402
from sglang_nvfp4_patches.models import LLAMA4_ARCHITECTURES  # noqa: E402
from sglang_nvfp4_patches.patch import Patch  # noqa: E402
from sglang_nvfp4_patches.server_args_seam import hooks  # noqa: E402
from sglang_nvfp4_patches.server_args_seam.question import question  # noqa: E402
from sglang_nvfp4_patches.patch_report import PatchReport, PatchState  # noqa: E402
from sglang_nvfp4_patches.suspension import Suspension  # noqa: E402

off = Suspension(NAME)  # explain's unpatched column


@question(NAME, "decode_attention_backend", LLAMA4_ARCHITECTURES, off.active)
def answer(launch: Any) -> str:
    return "triton"


def install(forced: bool, observe: bool) -> PatchReport:
    if observe:
        return unpatched()
    failure = hooks.ask(NAME)
    return PatchReport(NAME, PatchState.FAILED if failure else PatchState.PENDING, failure or "")


def state() -> PatchReport:
    on = hooks.times_asked(NAME) == 1
    return PatchReport(NAME, PatchState.APPLIED if on else PatchState.FAILED, hooks.where())


def unpatched() -> PatchReport:
    return PatchReport(NAME, PatchState.NOT_PATCHED, "Llama 4 keeps SGLang's decode backend")


def note(moe_runner: str | None, moe_quantization: str | None) -> str:
    return f"{NAME}: Llama 4 decodes with triton"


def release_facts() -> dict[str, str]:
    from sglang_nvfp4_patches.simulation.bundled import LLAMA4_NVFP4
    from sglang_nvfp4_patches.simulation.gpus import GPU_PROFILES
    from sglang_nvfp4_patches.simulation.server_args import resolve

    resolved = resolve(LLAMA4_NVFP4, GPU_PROFILES["sm100"])
    return {"demo:decode": str(resolved.decode_attention_backend)}


def checks() -> list[CheckResult]:
    from sglang_nvfp4_patches.evidence_check import agrees_or_kept

    cells = release_facts()
    return [run_check(NAME, "decode backend", lambda: agrees_or_kept(cells, str(cells)))]


PATCH = Patch(
    NAME, LLAMA4_ARCHITECTURES, install, state, unpatched, note, checks, release_facts,
    off.suspended,
)
'''


@pytest.fixture(scope="module")
def copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The plugin's copy with the fourth patch: its package, and its line in the patch list."""
    root = tmp_path_factory.mktemp("fourth") / "python"
    plugin = root / PACKAGE.name
    shutil.copytree(PACKAGE, plugin, ignore=shutil.ignore_patterns("__pycache__"))
    (plugin / "demo_decode").mkdir()
    (plugin / "demo_decode" / "__init__.py").write_text(DEMO, encoding="utf-8")
    patches = plugin / "patches.py"
    text = patches.read_text(encoding="utf-8")
    listed = "    nvfp4_moe_runner.PATCH,\n"
    assert listed in text
    text = text.replace(listed, listed + "    demo_decode.PATCH,\n")
    imports = "from sglang_nvfp4_patches import "
    patches.write_text(text.replace(imports, imports + "demo_decode, "), encoding="utf-8")
    return root


def _run(copy: Path, *args: str, records: Path) -> tuple[int, str, str]:
    cwd = os.getcwd()
    os.chdir(copy)  # `python -m` puts the working directory first on sys.path
    try:
        env = {"SGLANG_NVFP4_PATCHES_RECORDS": str(records)}
        done = server().start(["-m", *args], env).wait(timeout=300)
    finally:
        os.chdir(cwd)
    return done.returncode, done.stdout, done.stderr


def test_doctor_explain_and_verify_cover_the_fourth_patch(copy: Path, tmp_path: Path) -> None:
    records = tmp_path / "records"
    code, out, err = _run(copy, "sglang_nvfp4_patches", "doctor", "--json", records=records)
    assert code == 0, err[-3000:]
    assert json.loads(out)["patches"][NAME]["status"] == "applied"

    model = ("--json", "--model", str(LLAMA4_NVFP4), "--gpu", "sm100")
    code, out, err = _run(copy, "sglang_nvfp4_patches", "explain", *model, records=records)
    assert code == 0, err[-3000:]
    (row,) = json_lines(out)
    assert f"{NAME}: Llama 4 decodes with triton" in row["note"]
    assert NAME in row["decided_by"].split(", ")  # through its question's field

    found = tmp_path / "found.json"
    child = ("sglang_nvfp4_patches.verify.child", NAME, str(found))
    code, _, err = _run(copy, *child, records=records)
    assert code == 0, err[-3000:]
    (result,) = json.loads(found.read_text())["results"]
    assert result["outcome"] == "held", result
    columns, rows = parse((records / KEPT_NAME).read_text())
    assert COLUMN in columns and rows[0].cell(COLUMN) == "triton"
