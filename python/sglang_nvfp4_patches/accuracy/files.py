"""Files this tool reads and writes must be regular files, read with a size bound (pure).

A FIFO or ``/dev/zero`` would block a read forever: files are opened non-blocking, then fstat'd.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from sglang_nvfp4_patches.accuracy.errors import ConfigError, DatasetError, RunFileError
from sglang_nvfp4_patches.accuracy.limits import MAX_CSV_BYTES, MAX_FILE_BYTES
from sglang_nvfp4_patches.errors import UsageError

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def kind_of(mode: int) -> str:
    """What a non-regular file is, in words: ``a FIFO (named pipe)``, ``a directory``, ..."""
    return next((words for test, words in _KINDS if test(mode)), "not a regular file")


@dataclass(frozen=True)
class FileRole:
    """What a file read with :func:`read_bounded` is for: name, size bound, error, remedy."""

    noun: str
    limit: int
    error: type[UsageError]
    remedy: str = ""


RUN_FILE = FileRole("a run file", MAX_FILE_BYTES, RunFileError)
CSV_FILE = FileRole("an MMLU csv file", MAX_CSV_BYTES, DatasetError)


def read_bounded(path: Path, role: FileRole = RUN_FILE) -> bytes:
    """The bytes of a regular file within ``role.limit``; else ``role.error`` (or not found)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise role.error(f"{path}: cannot open ({exc.strerror or exc})") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):  # checked before fdopen, which refuses a directory
        os.close(fd)
        raise role.error(
            f"{path}: is {kind_of(info.st_mode)}, not a regular file; "
            + (role.remedy or f"give the path of {role.noun}")
        )
    with os.fdopen(fd, "rb") as handle:
        if info.st_size > role.limit:
            raise role.error(_too_large(path, info.st_size, role))
        try:
            data = handle.read(role.limit + 1)
        except OSError as exc:
            raise role.error(f"{path}: cannot read ({exc.strerror or exc})") from None
    if len(data) > role.limit:  # it grew while being read
        raise role.error(_too_large(path, len(data), role))
    return data


def _too_large(path: Path, size: int, role: FileRole) -> str:
    noun = role.noun.split(" ", 1)[1]  # "a run file" -> "run file"
    size_mib, limit_mib = f"{size / 2**20:,.0f} MiB", f"{role.limit / 2**20:,.0f} MiB"
    return (
        f"{path}: is {size_mib}, more than the {limit_mib} any real {noun} "
        f"comes near; this is not {role.noun} (or not one this tool can read)"
    )


def require_writable_target(path: Path, option: str) -> None:
    """``path`` is a regular file or does not exist yet; anything else raises ConfigError."""
    where = f"{option} {path}"
    try:
        info = path.stat()
    except NotADirectoryError:  # under a file: the caller's directory check words it
        return
    except FileNotFoundError:
        if path.is_symlink():
            raise ConfigError(
                f"{where}: is a symbolic link to {os.readlink(path)}, which does not exist; "
                "remove or fix the link, or pick another path"
            ) from None
        return
    except OSError as exc:
        raise ConfigError(f"{where}: cannot use this path ({exc.strerror or exc})") from None
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError(
            f"{where}: is {kind_of(info.st_mode)}, not a regular file; results must go to a "
            "file (e.g. RUN.json) that does not exist yet or holds an earlier run"
        )
