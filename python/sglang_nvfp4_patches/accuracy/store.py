"""Crash-safe result storage: an append-only JSONL of answers next to RUN.json (pure).

Each answer is a line flushed at once (an fsync would only guard against a power cut).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import stat
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sglang_nvfp4_patches.accuracy.errors import BusyError, ConfigError, ResumeError, RunFileError
from sglang_nvfp4_patches.accuracy.files import kind_of, read_bounded, require_writable_target
from sglang_nvfp4_patches.errors import UsageError, loads_json
from sglang_nvfp4_patches.write_probe import probe_write

PARTIAL_SUFFIX = ".partial.jsonl"
RUN_FORMAT = "sglang-nvfp4-patches/accuracy-run"
PARTIAL_FORMAT = RUN_FORMAT + "/partial"
RUN_VERSION = 1  # the run-file layout this version writes and reads
# Keys of RUN.json (and of the partial header) that must match for answers to be reusable;
# ``server`` is the model path, flags and launcher ``accuracy ab`` started the server with
# (else None).
SETTING_KEYS: tuple[str, ...] = ("api", "model", "shots", "max_new_tokens", "server")

Record = dict[str, Any]
# The longest process id Linux hands out (pid_max is at most 2**22): temporary names carry it.
_PID_DIGITS = len(str(2**22))
_PID_LINE = re.compile(rb"[0-9]{1,%d}\n?" % _PID_DIGITS)
# Text as written (not \u escapes). RUN.json: indented metadata, one record per line; the
# partial file: one compact line per record.
_META = json.JSONEncoder(ensure_ascii=False, indent=1)
_RECORD = json.JSONEncoder(ensure_ascii=False)
_LINE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True)
class Stored:
    """What an earlier run left in one file: metadata, answers, and NOTE lines."""

    meta: Mapping[str, Any]
    records: list[Record]
    notes: tuple[str, ...] = ()


def partial_path(out: Path) -> Path:
    """``RUN.json`` -> ``RUN.json.partial.jsonl``."""
    return out.with_name(out.name + PARTIAL_SUFFIX)


def lock_path(out: Path) -> Path:
    """``RUN.json`` -> ``.RUN.json.lock``: what a process writing ``out`` holds locked."""
    return out.with_name(f".{out.name}.lock")


def ensure_output_file(out: Path, option: str) -> None:
    """``out`` and its partial file can be written, with a name this file system takes."""
    for path in (out, partial_path(out)):
        require_writable_target(path, option)
    existing = ensure_output_dir(out.parent, option, out)
    longest = _temporary(partial_path(out), int("9" * _PID_DIGITS)).name  # the longest used
    try:
        limit = os.pathconf(existing, "PC_NAME_MAX")
    except (OSError, ValueError):
        limit = 255
    if len(os.fsencode(longest)) > limit:
        raise ConfigError(
            f"{option} {out}: the file name is too long: with the suffixes of its partial and "
            f"temporary files it passes the {limit} bytes this file system allows; pick a "
            "shorter name"
        )


def ensure_output_dir(directory: Path, option: str, target: Path | None = None) -> Path:
    """The nearest existing ancestor of ``directory`` (``target``'s, else itself), checked
    writable with a probe file; ConfigError before any server starts."""
    target = target or directory
    where = f"{option} {target}"
    for existing in (directory, *directory.parents):  # at least once: ``existing`` is bound
        if existing.exists():
            break
        if existing.is_symlink():  # dangling, or a loop: mkdir would fail on it
            raise ConfigError(
                f"{where}: {existing} is a symbolic link to {os.readlink(existing)}, which does "
                "not exist or loops back on itself; remove or fix the link, or pick another path"
            )
    if not existing.is_dir():
        kind = None if existing.is_file() else kind_of(existing.stat().st_mode)
        if existing == target:
            what = kind or "an existing file"
            raise ConfigError(f"{where}: is {what}, not a directory; pick another path")
        raise ConfigError(
            f"{where}: lies under {existing}, which is {kind or 'a file'}, not a directory; "
            "pick another path"
        )
    try:
        probe_write(existing)
    except OSError as exc:
        raise ConfigError(
            f"{where}: cannot write there ({exc.strerror or exc}); pick a directory you can "
            "write to"
        ) from None
    if existing not in (directory, target.parent):  # nothing is made the user did not ask for
        raise ConfigError(
            f"{where}: the directory {target.parent} does not exist; create it first (nothing "
            f"but {target.name} is made for you), or pick another path"
        )
    return existing


@contextlib.contextmanager
def run_file_lock(out: Path, option: str) -> Iterator[None]:
    """Hold the exclusive lock of ``out`` while the block runs (BusyError when it is held)."""
    path = lock_path(out)
    try:
        path.parent.mkdir(exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"{option} {out}: cannot create {path.parent} ({exc.strerror})") from None
    fd = _lock(path, out, option)
    try:
        yield
    finally:
        path.unlink(missing_ok=True)
        os.close(fd)


def _lock(path: Path, out: Path, option: str) -> int:
    """A descriptor of ``path`` holding its flock, with this process's id written in it."""
    while True:
        try:  # not inherited by the servers `ab` starts: Python opens none inheritable
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NONBLOCK, 0o644)
        except OSError as exc:
            raise ConfigError(
                f"{option} {out}: cannot create its lock file {path} ({exc.strerror or exc})"
            ) from None
        try:
            _flock(fd, path, out, option)
        except BaseException:
            os.close(fd)
            raise
        # The holder before us removes the file as it ends; if it did so after we opened it,
        # our lock is on a name nobody else sees: lock the file now at that path instead.
        with contextlib.suppress(FileNotFoundError):
            if os.path.samestat(os.fstat(fd), os.stat(path)):
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()}\n".encode())
                return fd
        os.close(fd)


def _flock(fd: int, path: Path, out: Path, option: str) -> None:
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        raise ConfigError(
            f"{option} {out}: its lock file {path} is {kind_of(mode)}, not a regular file; "
            "remove it"
        )
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
            raise ConfigError(
                f"{option} {out}: cannot lock {path} ({exc.strerror or exc}); pick a path on "
                "a local file system"
            ) from None
        # ``process N`` when the lock file holds just a pid line (one byte more shows more).
        head = os.pread(fd, _PID_DIGITS + 2, 0)
        holder = f"process {int(head)}" if _PID_LINE.fullmatch(head) else "another process"
        raise BusyError(
            f"{option} {out}: {holder} is writing this run right now (it holds {path}); "
            f"wait for it to end, or pick another {option}"
        ) from None


def write_json_atomic(path: Path, data: Mapping[str, Any]) -> None:
    """RUN.json's text (:func:`run_file_text`), replacing ``path`` atomically."""
    _replace_atomically(path, run_file_text(data).encode())


def _temporary(path: Path, pid: int) -> Path:
    return path.with_name(f".{path.name}.{pid}.tmp")


def _replace_atomically(path: Path, data: bytes) -> None:
    """Write a temporary sibling, fsync, rename: readers see old or new, never half."""
    tmp = _temporary(path, os.getpid())
    try:
        with _naming(path), tmp.open("wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


@contextlib.contextmanager
def _naming(path: Path) -> Iterator[None]:
    """An OSError of a write (which names no file: a full disk) names ``path``."""
    try:
        yield
    except OSError as error:
        if error.filename is not None:
            raise
        raise OSError(error.errno, error.strerror, str(path)) from error


def run_file_text(data: Mapping[str, Any]) -> str:
    """Indented metadata, then one record per line (``indent`` over them all would be slow)."""
    meta = {key: value for key, value in data.items() if key != "records"}
    head = _META.encode(meta)
    if "records" not in data:
        return head + "\n"
    records = ",\n".join("  " + _RECORD.encode(r) for r in data["records"])
    body = f"[\n{records}\n ]" if records else "[]"
    prefix = head[:-2] + ",\n" if meta else "{\n"
    return f'{prefix} "records": {body}\n}}\n'


def record_problem(record: object) -> str | None:
    """What is wrong with one stored answer (a key a verdict rests on, or an unfounded
    ``correct``), or None."""
    if not (
        isinstance(record, dict)
        and all(isinstance(record.get(key), str) for key in ("id", "subject", "answer"))
        and isinstance(record.get("correct"), bool)
        and "prediction" in record
        and (record["prediction"] is None or isinstance(record["prediction"], str))
    ):
        return "lacks a valid id/subject/answer/correct/prediction"
    if record["correct"] == (record["prediction"] == record["answer"]):
        return None
    return (
        f"({record['id']}) says correct: {str(record['correct']).lower()}, but its prediction "
        f"is {record['prediction']!r} and its answer {record['answer']!r}; the file was edited "
        "or damaged, so its verdict cannot be trusted"
    )


def setting_differences(
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    keys: Sequence[str],
    labels: tuple[str, str] = ("stored", "now"),
) -> list[str]:
    """``key: stored X, now Y`` per differing setting; mappings field by field."""
    return [diff for key in keys for diff in _differences(key, old.get(key), new.get(key), labels)]


def _differences(key: str, old: object, new: object, labels: tuple[str, str]) -> list[str]:
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        return [
            diff
            for field in dict.fromkeys([*old, *new])
            for diff in _differences(f"{key}.{field}", old.get(field), new.get(field), labels)
        ]
    return [] if old == new else [f"{key}: {labels[0]} {old!r}, {labels[1]} {new!r}"]


def _stored(
    source: Path,
    meta: Mapping[str, Any],
    records: list[Record],
    settings: Mapping[str, Any],
    notes: tuple[str, ...] = (),
) -> Stored:
    """``records`` of ``source``, refused from other settings (without any, start afresh)."""
    diffs = setting_differences(meta, settings, SETTING_KEYS)
    if diffs and records:
        raise ResumeError(
            f"{source} holds answers from a run with other settings ({'; '.join(diffs)}); "
            "reusing them would mix two configurations in one run: rerun with the settings it "
            f"was started with, write to another --out (--out-dir for ab), or delete {source} "
            "to start over"
        )
    if not diffs:
        return Stored(meta, records, notes)
    note = (
        f"NOTE: {source} holds no answer (its run, with other settings: {'; '.join(diffs)}, "
        "stored none): nothing to keep, so this run starts afresh"
    )
    return Stored({}, [], (*notes, note))


def _refuse_damaged(where: str, problem: str, path: Path) -> ResumeError:
    return ResumeError(
        f"{where} {problem}: restore it, or delete {path} (or write to another --out, "
        "--out-dir for ab) to start over"
    )


def check_run_document(path: Path, data: object) -> dict[str, Any]:
    """``data`` (a parsed RUN.json) is a run file this version reads; else RunFileError."""
    if not isinstance(data, dict) or not isinstance(data.get("records"), list):
        raise RunFileError(
            f"{path}: not a run file (expected an object with a 'records' list, as accuracy run "
            "writes)"
        )
    if data.get("format") != RUN_FORMAT:
        found = f"is {data['format']!r}" if "format" in data else "is missing"
        raise RunFileError(
            f"{path}: not a run file of accuracy run: its 'format' field {found}, expected "
            f"{RUN_FORMAT!r}"
        )
    _check_version(path, data.get("version"), "'version' field")
    return data


def _check_version(path: Path, version: object, what: str) -> None:
    if isinstance(version, bool) or version != RUN_VERSION:
        raise RunFileError(
            f"{path}: its {what} is {version!r}; this sglang-nvfp4-patches reads version "
            f"{RUN_VERSION} only (a newer release may have written it: upgrade to read it)"
        )


def load_partial(path: Path, settings: Mapping[str, Any]) -> Stored:
    """Answers from an interrupted run: a torn line is dropped with a NOTE, a bad record refused."""
    try:
        lines = read_bounded(path).split(b"\n")
    except FileNotFoundError:
        return Stored({}, [])
    try:
        header = loads_json(lines[0])
    except ValueError:
        if len(lines) == 1:  # only a torn header (or nothing) was ever written
            return Stored({}, [])
        raise ResumeError(
            f"{path}:1: damaged header line; delete {path} to start the run over"
        ) from None
    if not isinstance(header, dict) or header.get("format") != PARTIAL_FORMAT:
        raise ResumeError(f"{path}:1: not a partial results file of this tool; delete it")
    _check_version(path, header.get("version", RUN_VERSION), "header's 'version'")
    records: list[Record] = []
    notes: list[str] = []
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        try:
            record = loads_json(line)
        except ValueError:
            notes.append(
                f"NOTE: {path}:{number}: a damaged line (not JSON: cut short when a run was "
                "killed, or edited) is dropped; a question answered only there is asked again"
            )
            continue
        problem = record_problem(record)
        if problem is not None:
            raise _refuse_damaged(f"{path}:{number}:", problem, path)
        records.append(record)
    return _stored(path, header, records, settings, tuple(notes))


def answers_on_disk(out: Path) -> tuple[int, Path]:
    """How many answers are stored for ``out`` and in which file (partial file first)."""
    with contextlib.suppress(OSError, UsageError):
        return max(read_bounded(partial_path(out)).count(b"\n") - 1, 0), partial_path(out)
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):  # UsageError too
        return len(loads_json(read_bounded(out))["records"]), out
    return 0, partial_path(out)


def load_finished_run(path: Path, settings: Mapping[str, Any]) -> Stored:
    """Records of an earlier RUN.json with the same settings, checked as ``compare`` does."""
    try:
        raw = read_bounded(path)
    except FileNotFoundError:
        return Stored({}, [])
    try:
        data = loads_json(raw)
    except ValueError as exc:
        raise RunFileError(
            f"{path}: exists but is not readable JSON ({exc}); move it away"
        ) from None
    try:
        check_run_document(path, data)
    except RunFileError as exc:
        raise RunFileError(f"{exc}; move it away or pick another --out") from None
    for position, record in enumerate(data["records"]):
        problem = record_problem(record)
        if problem is not None:
            raise _refuse_damaged(f"{path}: records[{position}]", problem, path)
    meta = {key: value for key, value in data.items() if key != "records"}
    return _stored(path, meta, data["records"], settings)


class PartialWriter:
    """Appends answers, after rewriting the file with the header and the carried records."""

    def __init__(self, path: Path, fields: Mapping[str, Any], carried: Iterable[Record]):
        self.path = path
        header = {"format": PARTIAL_FORMAT, "version": RUN_VERSION, **fields}
        _replace_atomically(path, b"".join([_line(header), *map(_line, carried)]))
        self._handle = path.open("ab")

    def append(self, record: Record) -> None:
        """One line per answer, handed to the OS immediately."""
        with _naming(self.path):
            self._handle.write(_line(record))
            self._handle.flush()

    def close(self) -> None:
        """Closes the file once (a file is closed even when its last flush fails)."""
        with _naming(self.path):
            self._handle.close()


def _line(obj: Mapping[str, Any]) -> bytes:
    """One compact JSON line, UTF-8 whatever the locale."""
    return (_LINE.encode(obj) + "\n").encode()
