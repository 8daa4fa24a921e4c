"""What ``explain`` checks in the user's input (pure: no SGLang, no torch).

A Hub id, a missing file or a config SGLang cannot use fails in milliseconds with one line,
before the 10 s SGLang import; a flag value is checked against the choices the installed
SGLang's own launcher accepts (read from SGLang by the caller, never copied here).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sglang_nvfp4_patches.errors import UsageError


class ModelDirError(UsageError):
    """``--model`` does not point at a directory with a usable config.json."""


def read_model_config(model_dir: Path) -> dict[str, Any]:
    """The checkpoint's config.json as a dict, or :class:`ModelDirError` saying what to fix."""
    if not model_dir.is_dir():
        raise ModelDirError(
            f"--model {model_dir}: not a local directory; explain never contacts the Hub, "
            "so download the checkpoint's config.json into a directory and pass that"
        )
    config_path = model_dir / "config.json"
    try:
        config = json.loads(config_path.read_text())
    except (OSError, ValueError) as error:
        raise ModelDirError(
            f"{config_path}: cannot read a JSON config ({error}); --model takes a local "
            "directory holding the checkpoint's config.json"
        ) from error
    if not isinstance(config, dict):
        raise ModelDirError(
            f"{config_path}: holds a JSON {type(config).__name__}, not an object; a checkpoint "
            "config.json is one JSON object"
        )
    model_type = config.get("model_type")
    if not isinstance(model_type, str) or not model_type:
        raise ModelDirError(
            f'{config_path}: has no "model_type" string; SGLang (through transformers) reads '
            'it to choose the model\'s config class (e.g. "gemma4", "llama4")'
        )
    return config


def architecture(config: dict[str, Any]) -> str | None:
    """The first listed architecture, as SGLang picks the model class."""
    architectures = config.get("architectures")
    if isinstance(architectures, list) and architectures and isinstance(architectures[0], str):
        return architectures[0]
    return None


def check_choices(
    flags: Mapping[str, str | None], choices: Mapping[str, Sequence[str]], release: str
) -> None:
    """Refuse a flag value SGLang's launcher would refuse (``choices`` keyed by argparse dest).

    An option SGLang gives no fixed choices is accepted as SGLang accepts it.
    """
    for option, value in flags.items():
        allowed = choices.get(option.lstrip("-").replace("-", "_"))
        if value is None or allowed is None or value in allowed:
            continue
        raise UsageError(
            f"{option} {value!r} is not a choice of SGLang {release}; "
            f"choose one of: {', '.join(sorted(allowed))}"
        )
