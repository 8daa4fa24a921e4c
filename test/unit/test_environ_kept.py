"""SGLang's resolution, asked again inside a server, may write the process environment: what it
wrote is put back, and nothing else is touched (once ``os.environ`` was cleared and refilled,
so another thread of the server could read an empty environment)."""

from __future__ import annotations

import os

import pytest

from sglang_nvfp4_patches.server_args_seam.launch import environ_kept


def test_what_the_block_wrote_is_put_back_without_clearing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("NVFP4_TEST_KEPT", "1")
    monkeypatch.setenv("NVFP4_TEST_CHANGED", "before")
    monkeypatch.setenv("NVFP4_TEST_REMOVED", "here")
    monkeypatch.delenv("NVFP4_TEST_ADDED", raising=False)
    before = dict(os.environ)
    cleared: list[bool] = []
    monkeypatch.setattr(os.environ, "clear", lambda: cleared.append(True))
    with environ_kept():
        os.environ["NVFP4_TEST_CHANGED"] = "after"
        os.environ["NVFP4_TEST_ADDED"] = "new"
        del os.environ["NVFP4_TEST_REMOVED"]
    assert dict(os.environ) == before and cleared == []
