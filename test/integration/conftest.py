"""Integration tests: the real, fully installed SGLang, with the plugin loaded by SGLang."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session", autouse=True)
def plugins_loaded_by_sglang() -> None:
    """SGLang's own loader finds our installed entry point, exactly as a server process does."""
    from sglang.srt.plugins import load_plugins

    load_plugins()
