"""Crash-safe result storage: an append-only JSONL of answered questions next to RUN.json
(pure).

Each answer is written as one line and flushed to the OS at once, so Ctrl-C, a crash or
SIGKILL loses nothing that was already answered (the page cache survives the process; an
fsync per line would only guard against a power cut and costs a disk round trip per answer).
The first line records the settings that shape the prompts and answers, so a rerun with other
settings cannot silently mix two different evaluations.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TextIO

from sglang_nvfp4_patches.accuracy.errors import ConfigError, ResumeError, RunFileError
from sglang_nvfp4_patches.errors import loads_json

PARTIAL_SUFFIX = ".partial.jsonl"
RUN_FORMAT = "sglang-nvfp4-patches/accuracy-run"
# Keys of RUN.json (and of the partial header) that must match for answers to be reusable;
# ``server`` is the model path, flags and launcher ``accuracy ab`` started the server with
# (else None).
SETTING_KEYS: tuple[str, ...] = ("api", "model", "shots", "max_new_tokens", "server")

Record = dict[str, Any]


def partial_path(out: Path) -> Path:
    """``RUN.json`` -> ``RUN.json.partial.jsonl``."""
    return out.with_name(out.name + PARTIAL_SUFFIX)


def ensure_output_dir(directory: Path, option: str) -> None:
    """Refuse an ``--out-dir`` that cannot be made or written, before any server starts or
    question is asked; nothing is left behind (the directory is made when first written)."""
    _writable_dir(directory, option, directory)


def ensure_output_file(out: Path, option: str) -> None:
    """``out`` can be written: not a directory, in a directory that exists or can be made."""
    if out.is_dir():
        raise ConfigError(f"{option} {out}: is a directory; give a file name such as RUN.json")
    _writable_dir(out.parent, option, out)


def _writable_dir(directory: Path, option: str, target: Path) -> None:
    """The nearest existing ancestor of ``directory`` is a directory a file can be created
    in (a probe file, removed at once); problems name ``option target``."""
    where = f"{option} {target}"
    existing = next(p for p in (directory, *directory.parents) if p.exists())
    if not existing.is_dir():
        if existing == target:
            raise ConfigError(f"{where}: is an existing file, not a directory; pick another path")
        raise ConfigError(
            f"{where}: lies under {existing}, which is a file, not a directory; pick another path"
        )
    try:
        handle, probe = tempfile.mkstemp(prefix=".write-probe-", dir=existing)
        os.close(handle)
        os.unlink(probe)
    except OSError as exc:
        raise ConfigError(
            f"{where}: cannot write there ({exc.strerror or exc}); pick a directory you can "
            "write to"
        ) from None


def write_json_atomic(path: Path, data: Mapping[str, Any]) -> None:
    """Write to a temporary sibling, fsync, then rename: readers see old or new, never half."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with tmp.open("w", encoding="utf-8") as handle:
            handle.write(run_file_text(data))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def run_file_text(data: Mapping[str, Any]) -> str:
    """Indented metadata, then one record per line: readable and diffable, and encoded by the
    C JSON encoder (``indent`` over 14k records would fall back to the slow Python one)."""
    meta = {key: value for key, value in data.items() if key != "records"}
    head = json.dumps(meta, indent=1, ensure_ascii=False)
    if "records" not in data:
        return head + "\n"
    records = ",\n".join(
        "  " + json.dumps(r, ensure_ascii=False, separators=(", ", ": ")) for r in data["records"]
    )
    body = f"[\n{records}\n ]" if records else "[]"
    prefix = head[:-2] + ",\n" if meta else "{\n"
    return f'{prefix} "records": {body}\n}}\n'


def is_valid_record(record: object) -> bool:
    """Shape check for one stored answer (a damaged line must not poison a resume)."""
    return (
        isinstance(record, dict)
        and isinstance(record.get("id"), str)
        and isinstance(record.get("subject"), str)
        and isinstance(record.get("answer"), str)
        and isinstance(record.get("correct"), bool)
        and (record.get("prediction") is None or isinstance(record.get("prediction"), str))
    )


def _setting_diffs(key: str, stored: object, now: object) -> list[str]:
    """``key: stored X, now Y`` per differing setting; ``server`` is compared field by field
    (``server.launcher: ...``), so the message names the flag that changed."""
    if isinstance(stored, Mapping) and isinstance(now, Mapping):
        return [
            diff
            for field in dict.fromkeys([*stored, *now])
            for diff in _setting_diffs(f"{key}.{field}", stored.get(field), now.get(field))
        ]
    return [] if stored == now else [f"{key}: stored {stored!r}, now {now!r}"]


def _check_settings(source: Path, stored: Mapping[str, Any], settings: Mapping[str, Any]) -> None:
    diffs = [
        diff for key in SETTING_KEYS for diff in _setting_diffs(key, stored.get(key), settings[key])
    ]
    if diffs:
        raise ResumeError(
            f"{source} holds answers from a run with other settings ({'; '.join(diffs)}); "
            "reusing them would mix two configurations in one run: rerun with the settings it "
            f"was started with, write to another --out (--out-dir for ab), or delete {source} "
            "to start over"
        )


def load_partial(path: Path, settings: Mapping[str, Any]) -> list[Record]:
    """Answers from an interrupted run. A torn last line (killed mid-write) or other damaged
    lines are dropped, so those questions are simply asked again."""
    try:
        lines = path.read_bytes().split(b"\n")
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise ResumeError(f"{path}: cannot read partial results ({exc})") from exc
    try:
        header = loads_json(lines[0])
    except ValueError:
        if len(lines) == 1:  # only a torn header (or nothing) was ever written
            return []
        raise ResumeError(
            f"{path}:1: damaged header line; delete {path} to start the run over"
        ) from None
    if not isinstance(header, dict) or header.get("format") != RUN_FORMAT + "/partial":
        raise ResumeError(f"{path}:1: not a partial results file of this tool; delete it")
    _check_settings(path, header, settings)
    records: list[Record] = []
    for line in lines[1:]:
        try:
            record = loads_json(line)
        except ValueError:
            continue
        if is_valid_record(record):
            records.append(record)
    return records


def load_finished_run(path: Path, settings: Mapping[str, Any]) -> list[Record]:
    """Records of an earlier RUN.json with the same settings, so rerunning a finished command
    only asks what is still missing."""
    if not path.exists():
        return []
    try:
        data = loads_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RunFileError(
            f"{path}: exists but is not readable JSON ({exc}); move it away"
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("records"), list):
        raise RunFileError(f"{path}: exists but is not a run file; move it away or pick --out")
    _check_settings(path, data, settings)
    return [r for r in data["records"] if is_valid_record(r)]


class PartialWriter:
    """Appends answered records; the file is first rewritten (atomically) with the header and
    the records being carried over, which also drops any torn line of a killed run."""

    def __init__(self, path: Path, settings: Mapping[str, Any], carried: Iterable[Record]):
        self.path = path
        header = {"format": RUN_FORMAT + "/partial", **{k: settings[k] for k in SETTING_KEYS}}
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            with tmp.open("w", encoding="utf-8") as handle:
                handle.write(_line(header))
                handle.writelines(_line(record) for record in carried)
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        self._handle: TextIO | None = path.open("a", encoding="utf-8")

    def append(self, record: Record) -> None:
        """One line per answer, handed to the OS immediately."""
        if self._handle is None:
            raise ValueError(f"{self.path}: writer already closed")
        self._handle.write(_line(record))
        self._handle.flush()

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def remove(self) -> None:
        """Delete the partial file once RUN.json holds everything."""
        self.close()
        self.path.unlink(missing_ok=True)


def _line(obj: Mapping[str, Any]) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n"
