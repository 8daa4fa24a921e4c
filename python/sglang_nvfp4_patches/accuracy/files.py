"""The files the accuracy tool reads and writes must be regular files, and are read with a
size bound (pure).

A FIFO, a terminal, ``/dev/zero`` or ``/dev/stdout`` given as a run file would block a read
forever or feed it without end. Run files are opened without blocking and checked with
``fstat`` on the opened descriptor (so nothing can be swapped in between the check and the
read), and a file larger than :data:`~sglang_nvfp4_patches.accuracy.limits.MAX_FILE_BYTES`
is refused with its size.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from sglang_nvfp4_patches.accuracy.errors import ConfigError, RunFileError
from sglang_nvfp4_patches.accuracy.limits import MAX_FILE_BYTES

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


def _megabytes(size: int) -> str:
    return f"{size / 2**20:,.0f} MiB"


def read_bounded(path: Path) -> bytes:
    """The bytes of a regular file of at most :data:`MAX_FILE_BYTES`; anything else raises
    RunFileError naming ``path`` (FileNotFoundError is left to the caller)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise RunFileError(f"{path}: cannot open ({exc.strerror or exc})") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):  # checked before fdopen, which refuses a directory
        os.close(fd)
        raise RunFileError(
            f"{path}: is {kind_of(info.st_mode)}, not a regular file; give the path of a run file"
        )
    with os.fdopen(fd, "rb") as handle:
        if info.st_size > MAX_FILE_BYTES:
            raise RunFileError(_too_large(path, info.st_size))
        try:
            data = handle.read(MAX_FILE_BYTES + 1)
        except OSError as exc:
            raise RunFileError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if len(data) > MAX_FILE_BYTES:  # it grew while being read
        raise RunFileError(_too_large(path, len(data)))
    return data


def _too_large(path: Path, size: int) -> str:
    return (
        f"{path}: is {_megabytes(size)}, more than the {_megabytes(MAX_FILE_BYTES)} any real run "
        "file comes near; this is not a run file (or not one this tool can read)"
    )


def require_writable_target(path: Path, option: str) -> None:
    """``path`` is a regular file or does not exist yet (a dangling or looping symbolic link
    counts as neither); anything else raises ConfigError before anything is read or asked."""
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
