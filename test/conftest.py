"""Shared pytest set-up. Unit tests never import SGLang; integration tests use the real one.

``test/`` is on ``sys.path`` (pyproject's ``pythonpath``), so helpers import as ``support``.

The release under test is whatever SGLang the interpreter imports: the primary environment's
0.5.23, or an older release overlaid with ``scripts/test_release.sh X`` (PYTHONPATH).
``--sglang-release X`` (or ``SGLANG_NVFP4_TEST_RELEASE=X``) states which one is expected, so
a run whose overlay did not take effect fails loudly instead of testing the wrong release.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile

import pytest

from sglang_nvfp4_patches.supported_releases import sglang_version

# The session's own temporary directory, and its check that the tests left nothing there.
pytest_plugins = ("support.temp_guard",)

RELEASE_ENV = "SGLANG_NVFP4_TEST_RELEASE"
RECORDS_ENV = "SGLANG_NVFP4_PATCHES_RECORDS"
_OWN_RECORDS = pytest.StashKey[str]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--sglang-release",
        default=os.environ.get(RELEASE_ENV),
        help=f"SGLang release expected under test (default: ${RELEASE_ENV}, else any)",
    )


def pytest_configure(config: pytest.Config) -> None:
    # Evidence records verify writes go to a directory of this session's, never the user's
    # (a record left there from an earlier run would answer for the SGLang under test).
    if RECORDS_ENV not in os.environ:
        records = tempfile.mkdtemp(prefix="records-")  # in the session's own (temp_guard)
        os.environ[RECORDS_ENV] = records
        config.stash[_OWN_RECORDS] = records
    config.addinivalue_line(
        "markers", "release_matrix: runs against every supported SGLang release in CI"
    )
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        # A shell without job control (a CI script's `.ci/run &`, `nohup`) starts background
        # commands with SIGINT ignored, and every process they start would inherit that: the
        # Ctrl-C tests would test an ignored Ctrl-C. Ctrl-C stops this process as in a
        # terminal, and the processes the tests start (exec resets a handler, not SIG_IGN)
        # get SIGINT's default action.
        signal.signal(signal.SIGINT, signal.default_int_handler)
    expected = config.getoption("--sglang-release")
    if expected and sglang_version() != expected:
        raise pytest.UsageError(
            f"--sglang-release {expected} requested but SGLang {sglang_version()} is "
            f"imported; run `scripts/test_release.sh {expected}` to overlay that release"
        )


def pytest_unconfigure(config: pytest.Config) -> None:
    records = config.stash.get(_OWN_RECORDS, None)
    if records is not None:
        shutil.rmtree(records, ignore_errors=True)
        os.environ.pop(RECORDS_ENV, None)


def pytest_report_header(config: pytest.Config) -> str:
    return f"SGLang release under test: {sglang_version()}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        report.sections.append(("SGLang release", f"failed on SGLang {sglang_version()}"))
