"""A pytest plugin: the session's own temporary directory, checked for what the tests left there.

Every test, and every process a test starts, makes its temporary files in one directory of the
session's: ``$TMPDIR`` and ``tempfile.tempdir`` point there (pytest's own ``tmp_path`` folders
stay where they were). When the tests have run, an entry there named as this package names its
temporary files (:data:`OURS`) is one that a test, or the command it ran, made and did not
remove: the session fails and names each. The directory goes when the session ends, so nothing
stays in the user's temporary directory, and a suite running beside this one (CI runs two jobs
at a time) neither sees nor touches it.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

# How this package names what it puts in the temporary directory: the report of an internal
# error (cli.INTERNAL_ERROR_PREFIX), verify's folder (nvfp4-verify-), the simulated ranks'
# (nvfp4-ranks-).
OURS = ("sglang-nvfp4-patches-", "nvfp4-")
_DIRECTORY = pytest.StashKey[Path]()


@pytest.hookimpl(tryfirst=True)  # before the integration tests' fork server starts
def pytest_configure(config: pytest.Config) -> None:
    outside = tempfile.gettempdir()
    os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", outside)  # where pytest keeps tmp_path
    directory = Path(tempfile.mkdtemp(prefix="suite-tmp-", dir=outside))
    os.environ["TMPDIR"] = tempfile.tempdir = str(directory)
    config.stash[_DIRECTORY] = directory
    # Removed at exit, after the fork server and Ray (registered later, so ended earlier).
    atexit.register(shutil.rmtree, directory, ignore_errors=True)


def left_behind(directory: Path) -> list[str]:
    """The names in ``directory`` made as this package names its temporary files."""
    return sorted(entry.name for entry in directory.iterdir() if entry.name.startswith(OURS))


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    directory = session.config.stash.get(_DIRECTORY, None)
    if directory is None:
        return
    left = left_behind(directory)
    if not left:
        return
    lines = [
        f"the tests left {len(left)} temporary file(s) of sglang-nvfp4-patches in {directory} "
        "(the session's $TMPDIR, removed as it ends); a test, or a command it ran, made them "
        "and did not remove them. Find it, and remove them there or point its tempfile.tempdir "
        "(or its processes' TMPDIR) at tmp_path:",
        *(f"  {name}" for name in left),
    ]
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        print("\n".join(lines), file=sys.stderr)
    else:
        reporter.write_sep("=", "temporary files left behind", red=True, bold=True)
        for line in lines:
            reporter.write_line(line)
    if session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
