"""What ``explain`` checks in the user's input (pure: no SGLang, no torch).

A Hub id, a missing file or a config that is not a JSON object with a ``model_type`` fails in
milliseconds with one line, before the 10 s SGLang import; whatever SGLang itself raises while
reading the config later is worded here as one line naming the field (:func:`config_problem`).
"""

from __future__ import annotations

import re
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sglang_nvfp4_patches.accuracy.files import FileRole, read_bounded
from sglang_nvfp4_patches.errors import UsageError, loads_json


class ModelDirError(UsageError):
    """``--model`` does not point at a directory with a usable config.json."""


# A checkpoint's config.json is a few KB (a long quantization ignore list: some hundred KB).
MAX_CONFIG_BYTES = 16 * 2**20
CONFIG_FILE = FileRole("a checkpoint's config.json", MAX_CONFIG_BYTES, ModelDirError)


def read_model_config(model_dir: Path) -> dict[str, Any]:
    """The checkpoint's config.json as a dict, or :class:`ModelDirError` saying what to fix."""
    if model_dir.is_file():
        raise ModelDirError(
            f"--model {model_dir}: is a file; --model takes the directory that holds the "
            f"checkpoint's config.json (here: --model {model_dir.parent})"
        )
    if not model_dir.is_dir():
        raise ModelDirError(
            f"--model {model_dir}: not a local directory; explain never contacts the Hub, "
            "so download the checkpoint's config.json into a directory and pass that"
        )
    config_path = model_dir / "config.json"
    try:
        config = loads_json(read_bounded(config_path, CONFIG_FILE))
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


# Identifiers a line of SGLang/transformers reads: attributes, ["key"] and .get("key").
_NAMES = re.compile(r"""\.get\(\s*['"](\w+)['"]|\.(\w+)|\[\s*['"](\w+)['"]\s*\]""")
# ... and those read off something called *config (the field even when the file lacks it).
_CONFIG_FIELD = re.compile(r"""config\s*(?:\.get\(\s*['"](\w+)['"]|\.(\w+)|\[\s*['"](\w+)['"])""")


def _keys(config: Mapping[str, Any]) -> dict[str, Any]:
    """Every key of the config and of its nested objects (text_config, ...), outer wins."""
    found: dict[str, Any] = {}
    pending: list[Mapping[str, Any]] = [config]
    while pending:
        current = pending.pop(0)
        for key, value in current.items():
            found.setdefault(key, value)
            if isinstance(value, Mapping):
                pending.append(value)
    return found


def _field(line: str, keys: Mapping[str, Any]) -> str | None:
    names = [next(n for n in match if n) for match in _NAMES.findall(line)]
    in_file = [name for name in names if name in keys]
    if in_file:
        return in_file[0]
    read = [next(n for n in match if n) for match in _CONFIG_FIELD.findall(line)]
    return read[0] if read else None


def _value_text(value: object) -> str:
    kind = {dict: "an object", list: "a list", str: "the string", bool: "the boolean"}.get(
        type(value), "the value"
    )
    shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
    return "an empty list" if value == [] else f"{kind} {shown}"


def config_problem(
    config_path: Path,
    config: Mapping[str, Any],
    error: BaseException,
    frames: Sequence[traceback.FrameSummary],
    release: str,
) -> str:
    """One line for an exception SGLang raised reading ``config``: the field (found in the
    failing line of SGLang or transformers, innermost first), what the file holds there, and
    the line that reads it, which shows what SGLang expects."""
    keys = _keys(config)
    where = frames[-1]
    field = None
    for frame in reversed(frames):
        field = _field(frame.line or "", keys)
        if field is not None:
            where = frame
            break
    else:  # the line names no field; SGLang's message may ("'text_config' expected ...")
        field = next((key for key in re.findall(r"\w+", str(error)) if key in keys), None)
    source = re.sub(r"^.*/(?=(sglang|transformers)/)", "", where.filename)
    reads = f"`{(where.line or '').strip()}` ({source}:{where.lineno})"
    failure = f"{type(error).__name__}: {' '.join(str(error).split())}"
    if field is None:
        subject = "a field it reads"
    elif field in keys:
        subject = f'field "{field}" ({_value_text(keys[field])} here)'
    else:
        subject = f'field "{field}" (missing here)'
    return (
        f"SGLang {release} cannot read {config_path}: {subject}; SGLang reads it as {reads} "
        f"and fails with {failure}; fix that field (compare the checkpoint's published "
        "config.json)"
    )
