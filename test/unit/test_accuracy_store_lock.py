"""The run-file lock in this process: what its refusals say, whom they name, the lock file
it leaves, and the race with a holder that is just ending (no SGLang import).

The two-process cases (a second writer, a holder killed with SIGKILL) are in
``test_accuracy_files.py``; these run in-process so that ``scripts/mutation.sh`` sees them.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sglang_nvfp4_patches.accuracy.errors import BusyError, ConfigError
from sglang_nvfp4_patches.accuracy.store import lock_path, run_file_lock

Flock = Callable[[int, int], None]


def _held_by_another_open_file(path: Path, content: bytes) -> int:
    """A descriptor of ``path`` holding its flock, as another process's would (flock locks
    belong to the open file, so a second open in this process conflicts with it)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    os.write(fd, content)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def _busy_message(out: Path) -> str:
    with pytest.raises(BusyError) as refused, run_file_lock(out, "--out"):
        pass  # pragma: no cover - the lock must refuse
    return str(refused.value)


def _is_locked(path: Path) -> bool:
    """Whether some open file holds ``path``'s flock (tried from a fresh open file)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


@pytest.mark.parametrize(
    ("content", "named"),
    [
        (b"4194304\n", "process 4194304"),  # the longest pid Linux hands out
        (b"12", "process 12"),  # the newline not written yet
        (b"12345678\n", "another process"),  # longer than any pid
        (b"4194304\n5", "another process"),  # a pid line, then more
        ("١٢\n".encode(), "another process"),  # digits, but not ASCII ones
        (b"\xff\xfe12\n", "another process"),  # not text at all
        (b"pid 12\n", "another process"),
        (b"", "another process"),  # opened, not written yet
    ],
)
def test_a_busy_lock_names_its_holder_only_when_the_file_holds_just_a_pid(
    tmp_path: Path, content: bytes, named: str
) -> None:
    out = tmp_path / "RUN.json"
    fd = _held_by_another_open_file(lock_path(out), content)
    try:
        assert _busy_message(out) == (
            f"--out {out}: {named} is writing this run right now (it holds {lock_path(out)}); "
            "wait for it to end, or pick another --out"
        )
    finally:
        os.close(fd)
    assert lock_path(out).read_bytes() == content  # a refused run leaves the holder's file


def test_a_lock_file_that_is_a_fifo_is_refused_naming_what_it_is(tmp_path: Path) -> None:
    out = tmp_path / "RUN.json"
    os.mkfifo(lock_path(out))
    with pytest.raises(ConfigError) as refused, run_file_lock(out, "--out"):
        pass  # pragma: no cover - must be refused
    assert str(refused.value) == (
        f"--out {out}: its lock file {lock_path(out)} is a FIFO (named pipe), not a regular "
        "file; remove it"
    )
    assert stat.S_ISFIFO(lock_path(out).stat().st_mode)  # left for the user to remove


def test_a_lock_path_that_cannot_be_opened_is_refused_with_the_reason(tmp_path: Path) -> None:
    out = tmp_path / "RUN.json"
    lock_path(out).mkdir()
    with pytest.raises(ConfigError) as refused, run_file_lock(out, "--out"):
        pass  # pragma: no cover - must be refused
    assert str(refused.value) == (
        f"--out {out}: cannot create its lock file {lock_path(out)} (Is a directory)"
    )


def test_a_file_system_without_flock_is_refused_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Some network file systems answer flock with ENOLCK (simulated here)."""

    def no_locks(fd: int, operation: int) -> None:
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    monkeypatch.setattr(fcntl, "flock", no_locks)
    out = tmp_path / "RUN.json"
    with pytest.raises(ConfigError) as refused, run_file_lock(out, "--out"):
        pass  # pragma: no cover - must be refused
    assert str(refused.value) == (
        f"--out {out}: cannot lock {lock_path(out)} (No locks available); pick a path on a "
        "local file system"
    )


def test_the_lock_file_is_an_ordinary_file_holding_this_process_id(tmp_path: Path) -> None:
    out = tmp_path / "RUN.json"
    umask = os.umask(0o022)
    try:
        with run_file_lock(out, "--out"):
            info = lock_path(out).stat()
            assert stat.S_IMODE(info.st_mode) == 0o644
            assert lock_path(out).read_text() == f"{os.getpid()}\n"
            assert _is_locked(lock_path(out))
    finally:
        os.umask(umask)


def test_a_process_started_while_the_lock_is_held_does_not_inherit_it(tmp_path: Path) -> None:
    """``accuracy ab`` starts servers while it holds the lock: if one inherited it, a server
    outliving a killed run would keep every later run of that file out."""
    out = tmp_path / "RUN.json"
    with run_file_lock(out, "--out"):
        child = subprocess.Popen(["sleep", "30"], close_fds=False)
        try:
            fds = Path(f"/proc/{child.pid}/fd")
            inherited = {os.path.realpath(fds / name) for name in os.listdir(fds)}
        finally:
            child.kill()
            child.wait()
    assert str(lock_path(out)) not in inherited


@pytest.fixture
def holder_ends_during_our_lock(
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Callable[[Path, bool], None]]:
    """Makes the first flock of a run meet a holder that is just ending: after we opened the
    lock file, the holder removes it (as ``run_file_lock`` does on its way out) and, when
    asked, a third process creates a fresh one at that path."""
    real: Flock = fcntl.flock
    plan: dict[str, object] = {}

    def racing(fd: int, operation: int) -> None:
        path = plan.pop("path", None)
        if isinstance(path, Path):
            path.unlink()
            if plan.pop("recreate"):
                path.write_text("")
        real(fd, operation)

    def arm(path: Path, recreate: bool) -> None:
        plan.update(path=path, recreate=recreate)

    monkeypatch.setattr(fcntl, "flock", racing)
    yield arm


@pytest.mark.parametrize("recreated", [False, True], ids=["removed", "removed-and-recreated"])
def test_a_holder_removing_the_lock_file_as_we_take_it_leaves_us_locking_the_file_at_the_path(
    tmp_path: Path, holder_ends_during_our_lock: Callable[[Path, bool], None], recreated: bool
) -> None:
    """Else our lock would be on a file nobody else sees, and a second run could start."""
    out = tmp_path / "RUN.json"
    lock_path(out).write_text("4194304\n")  # the ending holder's file
    holder_ends_during_our_lock(lock_path(out), recreated)
    with run_file_lock(out, "--out"):
        assert lock_path(out).read_text() == f"{os.getpid()}\n"
        assert _is_locked(lock_path(out))
        assert _busy_message(out).startswith(f"--out {out}: process {os.getpid()} is writing")
    assert not lock_path(out).exists()
