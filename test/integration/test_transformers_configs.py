"""Configs as transformers writes them: each bundled example rebuilt through transformers' own
config class, then written by ``to_dict()`` (nulls included: a null ``architectures`` in every
sub-config) and by ``save_pretrained()``. ``explain`` answers each exactly as it answers the
bundled file, on every simulated GPU, with the plugin loaded by SGLang."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sglang_nvfp4_patches.explain.run import explain_one
from sglang_nvfp4_patches.simulation.bundled import EXAMPLES_DIR
from sglang_nvfp4_patches.simulation.gpus import GPU_PROFILES

WAYS = ("to_dict", "save_pretrained")


def _answers(model_dir: Path) -> list[dict[str, object]]:
    """explain's rows for ``model_dir`` on every simulated GPU, less the model's name."""
    rows = [
        explain_one("m", model_dir, gpu, with_patches=True).as_json()
        for gpu in GPU_PROFILES.values()
    ]
    return [{key: value for key, value in row.items() if key != "model"} for row in rows]


def _write(source: Path, target: Path, way: str) -> dict:
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(str(source))
    target.mkdir(parents=True)
    if way == "to_dict":
        (target / "config.json").write_text(json.dumps(config.to_dict(), indent=2))
    else:
        config.save_pretrained(str(target))
    return json.loads((target / "config.json").read_text())


@pytest.mark.release_matrix
@pytest.mark.parametrize("example", sorted(path.name for path in EXAMPLES_DIR.iterdir()))
def test_explain_answers_a_config_transformers_wrote_as_the_bundled_one(
    tmp_path: Path, example: str
) -> None:
    source = EXAMPLES_DIR / example
    expected = _answers(source)
    for way in WAYS:
        written = _write(source, tmp_path / way, way)
        if way == "to_dict" and "text_config" in written:  # what once made explain exit 2
            assert written["text_config"]["architectures"] is None
        assert _answers(tmp_path / way) == expected, way


def test_every_multimodal_bundled_example_carries_what_to_dict_writes() -> None:
    """Each bundled config with sub-configs has the null nested "architectures" transformers'
    ``to_dict()`` writes, so every test and ``verify`` read such a config."""
    multimodal = 0
    for example in EXAMPLES_DIR.iterdir():
        config = json.loads((example / "config.json").read_text())
        for key in ("text_config", "vision_config"):
            if isinstance(config.get(key), dict):
                multimodal += 1
                assert config[key]["architectures"] is None, (example.name, key)
    assert multimodal >= 8
