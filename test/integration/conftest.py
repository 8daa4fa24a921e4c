"""Integration tests: the real, fully installed SGLang, with the plugin loaded by SGLang."""

from __future__ import annotations

import pytest

from support import forkserver, ray_jobs


@pytest.fixture(scope="session", autouse=True)
def plugins_loaded_by_sglang() -> None:
    """SGLang's own loader finds our installed entry point, exactly as a server process does."""
    from sglang.srt.plugins import load_plugins

    load_plugins()


def pytest_configure(config: pytest.Config) -> None:
    """Start the fork server now: its import of SGLang runs on the other core while this
    process collects (and imports SGLang itself)."""
    forkserver.server()


def pytest_collection_finish(session: pytest.Session) -> None:
    """Stop the fork server again when no selected test needs it; start the real-Ray jobs in
    the background when a selected test will read them."""
    modules = {getattr(item, "module", None) for item in session.items} - {None}
    if session.config.option.collectonly:
        forkserver.discard()
        return
    if not any(map(forkserver.used_by, modules)):
        forkserver.discard()
    for item in session.items:
        skipped = any(mark.args and mark.args[0] for mark in item.iter_markers("skipif"))
        jobs = getattr(item.module, "JOBS", None) if hasattr(item, "module") else None
        if jobs is not None and "ray_jobs" in getattr(item, "fixturenames", ()) and not skipped:
            ray_jobs.start(jobs)
            break
