"""Integration tests: the real, fully installed SGLang, with the plugin loaded by SGLang."""

from __future__ import annotations

import pytest

from support import forkserver


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
    """Stop the fork server again when no selected test needs it."""
    modules = {getattr(item, "module", None) for item in session.items} - {None}
    if session.config.option.collectonly or not any(map(forkserver.used_by, modules)):
        forkserver.discard()
