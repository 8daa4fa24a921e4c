"""What ``explain`` checks in the user's input (pure: no SGLang, no torch): a bad checkpoint
directory fails in milliseconds with one line naming the file, before the SGLang import, and
whatever SGLang raises reading it later is one line naming file and field (:func:`config_problem`).
"""

from __future__ import annotations

import json
import re
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from sglang_nvfp4_patches.accuracy.files import FileRole, read_bounded
from sglang_nvfp4_patches.errors import UsageError, loads_json
from sglang_nvfp4_patches.models import architecture, moe_family
from sglang_nvfp4_patches.simulation.moe_models import (
    EXPERTS_FIELD,
    TOP_K_FIELD,
    moe_field_problem,
)


class ModelDirError(UsageError):
    """``--model`` does not point at a directory with a usable config.json."""


CONFIG_NAME = "config.json"
# The files beside config.json SGLang reads, when present, while explain runs (the ModelOpt
# loader, transformers, ModelSlim); test_explain_files.py traces what SGLang opens.
SIDECAR_NAMES = ("hf_quant_config.json", "generation_config.json", "quant_model_description.json")
# A checkpoint's config.json is a few KB (a long quantization ignore list: some hundred KB).
MAX_CONFIG_BYTES = 16 * 2**20


def _role(path: Path) -> FileRole:
    remedy = (
        ""
        if path.name == CONFIG_NAME
        else f"SGLang reads it beside {CONFIG_NAME}: put the checkpoint's own {path.name} "
        "there, or remove it"
    )
    return FileRole(f"a checkpoint's {path.name}", MAX_CONFIG_BYTES, ModelDirError, remedy)


def _fix(path: Path) -> str:
    if path.name == CONFIG_NAME:
        return f"--model takes a local directory holding the checkpoint's {CONFIG_NAME}"
    return f"SGLang reads it beside {CONFIG_NAME}: fix it from the checkpoint's own, or remove it"


def _utf8(path: Path, data: bytes) -> str:
    """The text of a JSON file as SGLang and transformers read it: UTF-8, no byte-order mark."""
    encoding = json.detect_encoding(data)
    if encoding != "utf-8":
        named = "UTF-8 with a byte-order mark" if encoding == "utf-8-sig" else encoding.upper()
        raise ModelDirError(
            f"{path}: is encoded as {named}; SGLang and transformers read it as UTF-8 without "
            "a byte-order mark, so save it as plain UTF-8"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ModelDirError(
            f"{path}: is not UTF-8 (byte {data[error.start]:#04x} at offset {error.start}); "
            "SGLang and transformers read it as UTF-8, so save it as UTF-8"
        ) from None


def read_json_object(path: Path) -> dict[str, Any]:
    """One JSON object from a regular file of at most :data:`MAX_CONFIG_BYTES`, UTF-8; else
    :class:`ModelDirError` naming the file (FileNotFoundError where it is missing)."""
    text = _utf8(path, read_bounded(path, _role(path)))
    try:
        value = loads_json(text)
    except ValueError as error:
        raise ModelDirError(f"{path}: is not valid JSON ({error}); {_fix(path)}") from None
    if not isinstance(value, dict):
        raise ModelDirError(
            f"{path}: holds a JSON {json_type(value)}, not an object; a checkpoint's "
            f"{path.name} is one JSON object; {_fix(path)}"
        )
    return value


def read_checkpoint(model_dir: Path) -> dict[Path, dict[str, Any]]:
    """config.json (first) and each file beside it SGLang reads, by path, each checked."""
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
    config_path = model_dir / CONFIG_NAME
    try:
        config = read_json_object(config_path)
    except OSError as error:
        raise ModelDirError(
            f"{config_path}: cannot read a JSON config ({error}); {_fix(config_path)}"
        ) from error
    model_type = config.get("model_type")
    if not isinstance(model_type, str) or not model_type:
        raise ModelDirError(
            f'{config_path}: has no "model_type" string; SGLang (through transformers) reads '
            'it to choose the model\'s config class (e.g. "gemma4", "llama4")'
        )
    problem = field_type_problem(config) or moe_field_problem(config)
    if problem is not None:
        raise ModelDirError(f"{config_path}: {problem}")
    files = {config_path: config}
    for name in SIDECAR_NAMES:
        try:
            files[model_dir / name] = read_json_object(model_dir / name)
        except FileNotFoundError:  # absent (or a dangling link): SGLang skips it too
            continue
    return files


# The fields SGLang fails on (through transformers' config classes, its ModelConfig or its
# model loader) when they hold another type, by path: the test a value passes, and what SGLang
# reads it as. "text." is the text model's config: ``text_config`` where the checkpoint nests
# one, the top level where it has none (a null ``text_config``: the model's defaults). A field
# SGLang does not read (a nested "architectures", "_name_or_path", ...) is never refused;
# test_config_refusals.py shows SGLang failing on each rule.
TEXT = "text."
Rule = tuple[Callable[[Any], bool], str]
_WHOLE: Rule = (lambda v: type(v) is int, "a whole number")
FIELD_RULES: dict[str, Rule] = {
    "architectures": (
        lambda v: isinstance(v, list) and bool(v) and all(isinstance(a, str) and a for a in v),
        'an array of model class names, e.g. ["Llama4ForConditionalGeneration"]',
    ),
    "text_config": (lambda v: isinstance(v, dict | None), "an object (the text model's)"),
    **dict.fromkeys(
        ("quantization_config", "text_config.quantization_config"),
        (lambda v: isinstance(v, dict | None), "an object"),
    ),
    "quantization_config.quant_method": (lambda v: isinstance(v, str) and v, 'a name ("modelopt")'),
    **dict.fromkeys((f"{TEXT}hidden_size", f"{TEXT}num_hidden_layers"), _WHOLE),
}
# The MoE counts a family's config class types (null: its default; bounds: moe_field_problem);
# another family's class reads past a field of that name.
MOE_COUNT_RULES: dict[str, dict[str, Rule]] = {
    family: dict.fromkeys(
        (f"{TEXT}{TOP_K_FIELD[family]}", f"{TEXT}{EXPERTS_FIELD[family]}"),
        (lambda v: v is None or _WHOLE[0](v), _WHOLE[1]),
    )
    for family in TOP_K_FIELD
}


def _at(config: Mapping[str, Any], path: str) -> tuple[bool, Any]:
    """Whether the dotted ``path`` is in ``config``, and its value there."""
    value: Any = config
    for key in path.split("."):
        if not isinstance(value, Mapping) or key not in value:
            return False, None
        value = value[key]
    return True, value


def field_type_problem(config: Mapping[str, Any]) -> str | None:
    """A field SGLang reads by its type, of another type here, named (SGLang would blame
    another field)."""
    nested = "text_config" in config
    family = moe_family(architecture(config), enable_moe_block=True)
    for rule, (fine, what) in (FIELD_RULES | MOE_COUNT_RULES.get(family or "", {})).items():
        if rule.startswith(TEXT) and nested and not isinstance(config["text_config"], dict):
            continue  # a null text_config: SGLang reads the model's defaults, not these
        field = rule.replace(TEXT, "text_config." if nested else "", 1)
        present, value = _at(config, field)
        if present and not fine(value):
            return (
                f'field "{field}" is {_value_text(value)}; SGLang reads it as {what}: set it as '
                "the checkpoint's published config.json does"
            )
    return None


def read_model_config(model_dir: Path) -> dict[str, Any]:
    """The checkpoint's config.json, once :func:`read_checkpoint` passed it."""
    return read_checkpoint(model_dir)[model_dir / CONFIG_NAME]


# Identifiers a line of SGLang/transformers reads: attributes, ["key"] and .get("key").
_NAMES = re.compile(r"""\.get\(\s*['"](\w+)['"]|\.(\w+)|\[\s*['"](\w+)['"]\s*\]""")
# ... and those read off something called *config (the field even when the file lacks it).
_CONFIG_FIELD = re.compile(r"""config\s*(?:\.get\(\s*['"](\w+)['"]|\.(\w+)|\[\s*['"](\w+)['"])""")


def _keys(config: Mapping[str, Any]) -> dict[str, tuple[str, Any]]:
    """Every key of the config and of its nested objects (text_config, ...) with its path
    (``text_config.num_experts``) and value; the outermost wins."""
    found: dict[str, tuple[str, Any]] = {}
    pending: list[tuple[str, Mapping[str, Any]]] = [("", config)]
    while pending:
        prefix, current = pending.pop(0)
        for key, value in current.items():
            found.setdefault(key, (prefix + key, value))
            if isinstance(value, Mapping):
                pending.append((f"{prefix}{key}.", value))
    return found


def _field(line: str, keys: Mapping[str, Any]) -> str | None:
    names = [next(n for n in match if n) for match in _NAMES.findall(line)]
    in_file = [name for name in names if name in keys]
    if in_file:
        return in_file[0]
    read = [next(n for n in match if n) for match in _CONFIG_FIELD.findall(line)]
    return read[0] if read else None


# A parsed JSON value's type in JSON's words.
JSON_TYPES: dict[type, str] = {
    type(None): "null",
    bool: "boolean",
    int: "number",
    float: "number",
    str: "string",
    list: "array",
    dict: "object",
}


def json_type(value: object) -> str:
    return JSON_TYPES.get(type(value), type(value).__name__)


def _value_text(value: object) -> str:
    """A JSON value as a message names it: its JSON type, then the value as JSON writes it."""
    if value is None:
        return "null"
    kind = json_type(value)
    if value in ([], {}):
        return f"an empty {kind}"
    shown = json.dumps(value, default=str)
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    return f"{'an' if kind in ('array', 'object') else 'the'} {kind} {shown}"


def sglang_line(frame: traceback.FrameSummary) -> str:
    """A line of SGLang (or a library it calls) as a message quotes it, with its place."""
    source = re.sub(r"^.*/(?=(sglang|transformers)/)|^.*/site-packages/", "", frame.filename)
    return f"`{(frame.line or '').strip()}` ({source}:{frame.lineno})"


def failure_text(error: BaseException) -> str:
    return f"{type(error).__name__}: {' '.join(str(error).split())}"


# ModelOpt's names as SGLang matches them, exactly: the method "modelopt" (another spelling is
# not read as ModelOpt's) and its algorithms in capitals ("NVFP4", "FP8", ...); where SGLang's
# quantization code fails, such a name spelled another way is the field at fault.
MODELOPT = "modelopt"
QUANTIZATION_CODE = "/sglang/srt/layers/quantization/"
QUANTIZATION_SECTIONS = ("quantization_config", "quantization")  # hf_quant_config.json's


def _modelopt_misspelling(
    files: Mapping[Path, Mapping[str, Any]],
) -> tuple[Path, str, str, str] | None:
    """(file, field path, value, the name SGLang matches) of a ModelOpt name spelled otherwise."""
    for path, content in files.items():
        for section in QUANTIZATION_SECTIONS:
            quantization = content.get(section)
            if not isinstance(quantization, Mapping):
                continue
            method, algorithm = quantization.get("quant_method"), quantization.get("quant_algo")
            if isinstance(method, str) and method != MODELOPT and method.lower() == MODELOPT:
                return path, f"{section}.quant_method", method, MODELOPT
            modelopt = method in (None, MODELOPT)
            if modelopt and isinstance(algorithm, str) and algorithm != algorithm.upper():
                return path, f"{section}.quant_algo", algorithm, algorithm.upper()
    return None


def config_problem(
    files: Mapping[Path, Mapping[str, Any]],
    error: BaseException,
    frames: Sequence[traceback.FrameSummary],
    release: str,
) -> str:
    """One line for an exception SGLang raised reading the checkpoint's ``files`` (config.json
    first): the field the failing line reads (by its path), the file holding it, and that line."""
    failure = failure_text(error)
    misspelt = _modelopt_misspelling(files)
    if misspelt and any(QUANTIZATION_CODE in frame.filename for frame in frames):
        holder, path, value, expected = misspelt
        return (
            f'SGLang {release} cannot read {holder}: field "{path}" is {_value_text(value)}; '
            f"SGLang matches ModelOpt's names exactly (here {json.dumps(expected)}), so it "
            f"misreads the checkpoint and fails with {failure}; set it to {json.dumps(expected)}"
        )
    keys = {}
    for content in reversed(list(files.values())):  # config.json's keys win
        keys.update(_keys(content))
    where = frames[-1]
    field = None
    for frame in reversed(frames):
        field = _field(frame.line or "", keys)
        if field is not None:
            where = frame
            break
    else:  # the line names no field; SGLang's message may ("'text_config' expected ...")
        field = next((key for key in re.findall(r"\w+", str(error)) if key in keys), None)
    holder = next(
        (path for path, content in files.items() if field in _keys(content)), next(iter(files))
    )
    if field is None:
        subject = "a field it reads"
    elif field in keys:
        path, value = keys[field]
        subject = f'field "{path}" ({_value_text(value)} here)'
    else:
        subject = f'field "{field}" (missing here)'
    return (
        f"SGLang {release} cannot read {holder}: {subject}; SGLang reads it as "
        f"{sglang_line(where)} and fails with {failure}; fix that field (compare the "
        f"checkpoint's published {holder.name})"
    )
