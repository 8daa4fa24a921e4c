"""Every file SGLang opens beside config.json while ``explain`` runs is one explain checked
first (``SIDECAR_NAMES``), and each reaches SGLang only as a regular, small JSON object.

The checkpoint directories hold every ``*.json`` name SGLang's own sources mention (``{}``
each), so a file a release starts to read shows up here; an audit hook records each path
opened inside the directory while ``explain`` runs in this process (SGLang already imported,
the plugin loaded by SGLang).
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import sys
from pathlib import Path

import pytest

from sglang_nvfp4_patches import cli
from sglang_nvfp4_patches.explain.input import CONFIG_NAME, SIDECAR_NAMES
from support.configs import GEMMA4_NVFP4_MOE, LLAMA4_NVFP4, LLAMA4_NVFP4_CT, hf_quant_copy

# ModelSlim's description file, present, makes SGLang read the checkpoint as ModelSlim's: the
# run that builds the ModelOpt layer leaves it out.
MODELSLIM = "quant_model_description.json"
_OPENED: list[Path] = []
_WATCHED: list[Path] = []


def _record(event: str, args: tuple[object, ...]) -> None:
    if event == "open" and _WATCHED and isinstance(args[0], (str, Path)):
        path = Path(args[0])
        if path.parent == _WATCHED[0]:
            _OPENED.append(path)


sys.addaudithook(_record)  # for the process's life; it records only while a test watches


def _json_names_sglang_mentions() -> set[str]:
    import sglang

    names: set[str] = set()
    for source in (Path(sglang.__file__).parent / "srt").rglob("*.py"):
        text = source.read_text(encoding="utf-8", errors="replace")
        names.update(re.findall(r"""["']([\w.-]+\.json)["']""", text))
    return {name for name in names if not name.startswith(".")}


def _opened_by_explain(model: Path) -> tuple[set[str], dict]:
    _OPENED.clear()
    _WATCHED.append(model)
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            code = cli.main(["explain", "--model", str(model), "--gpu", "sm120", "--json"])
    finally:
        _WATCHED.clear()
    assert code == 0, out.getvalue()
    return {path.name for path in _OPENED}, json.loads(out.getvalue())


@pytest.mark.release_matrix
@pytest.mark.parametrize("case", ["hf_quant_config.json", "ModelSlim's file", "compressed"])
def test_sglang_opens_no_file_beside_the_config_that_explain_did_not_check(
    tmp_path: Path, case: str
) -> None:
    if case == "compressed":  # the quantization in config.json, a compressed-tensors layer
        model = tmp_path / "model"
        model.mkdir()
        (model / CONFIG_NAME).write_bytes((LLAMA4_NVFP4_CT / CONFIG_NAME).read_bytes())
    else:  # the ModelOpt quantization only in hf_quant_config.json
        model = hf_quant_copy(LLAMA4_NVFP4, tmp_path / "model")
    candidates = _json_names_sglang_mentions()
    assert {CONFIG_NAME, *SIDECAR_NAMES} <= candidates
    for name in candidates - {CONFIG_NAME, "hf_quant_config.json"}:
        if name != MODELSLIM or case == "ModelSlim's file":
            (model / name).write_text("{}")
    opened, row = _opened_by_explain(model)
    assert CONFIG_NAME in opened and "generation_config.json" in opened
    assert opened <= {CONFIG_NAME, *SIDECAR_NAMES}, sorted(opened - {CONFIG_NAME, *SIDECAR_NAMES})
    if case != "ModelSlim's file":  # the layer was built: the loader read its quant config
        assert row["moe_layer_runner"] is not None, row


def _quantization_beside(source: Path, target: Path, form: str) -> Path:
    """``source``'s config with its ModelOpt quantization moved into hf_quant_config.json,
    nested under "quantization" as ModelOpt exports it, with or without the producer (0.5.16
    does not read the flat form of config.json there: KeyError 'quantization')."""
    if form == "nested, producer":
        return hf_quant_copy(source, target)
    config = json.loads((source / CONFIG_NAME).read_text())
    quantization = config.pop("quantization_config")
    target.mkdir(parents=True)
    (target / CONFIG_NAME).write_text(json.dumps(config))
    quantization.pop("quant_method", None)
    (target / "hf_quant_config.json").write_text(json.dumps({"quantization": quantization}))
    return target


def _explained(model: Path) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(["explain", "--model", str(model), "--gpu", "sm120", "--json"])
    assert code == 0
    row = json.loads(out.getvalue())
    row["note"] = row["note"].replace(str(model), "MODEL")
    return {key: value for key, value in row.items() if key != "model"}


@pytest.mark.release_matrix
@pytest.mark.parametrize("source", [LLAMA4_NVFP4, GEMMA4_NVFP4_MOE], ids=["llama4", "gemma4"])
def test_a_quantization_given_only_in_hf_quant_config_gets_the_same_layer_outcome(
    tmp_path: Path, source: Path
) -> None:
    """The layer's runner, SGLang's own failure at warm-up and every note are those of the
    same quantization inside config.json, in each form ModelOpt exports hf_quant_config.json."""
    model = tmp_path / "in-config"
    model.mkdir()
    (model / CONFIG_NAME).write_bytes((source / CONFIG_NAME).read_bytes())
    expected = _explained(model)
    assert expected["moe_layer_runner"] is not None, expected
    for form in ("nested, producer", "nested"):
        beside = _quantization_beside(source, tmp_path / form.replace(", ", "-"), form)
        assert _explained(beside) == expected, form
