"""Our hooks go through SGLang's real ``HookRegistry`` and leave other plugins' targets alone."""

from __future__ import annotations

import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sglang_nvfp4_patches.sglang_hooks import PLUGIN_ENTRY_POINT, install_hook

pytestmark = pytest.mark.release_matrix

MINE = "nvfp4_hook_probe_mine.compute"
THEIRS = "nvfp4_hook_probe_theirs.compute"  # importable, but nobody has imported it yet


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[type]:
    from sglang.srt.plugins.hook_registry import HookRegistry

    (tmp_path / "nvfp4_hook_probe_theirs.py").write_text("def compute(value):\n    return value\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    module = types.ModuleType("nvfp4_hook_probe_mine")
    module.compute = lambda value: value + 1
    monkeypatch.setitem(sys.modules, module.__name__, module)
    yield HookRegistry
    for target in (MINE, THEIRS):
        HookRegistry._hooks.pop(target, None)
        HookRegistry._patched.discard(target)
    sys.modules.pop("nvfp4_hook_probe_theirs", None)


def add_ten(original: Callable[[int], int], value: int) -> int:
    return original(value) + 10


def double(original: Callable[[int], int], value: int) -> int:
    return original(value) * 2


def test_only_our_target_is_applied(registry: type) -> None:
    from sglang.srt.plugins.hook_registry import HookType

    registry.register(THEIRS, double, HookType.AROUND)  # another plugin, not applied yet
    installed = install_hook(MINE, add_ten)
    assert sys.modules["nvfp4_hook_probe_mine"].compute is installed
    assert installed(1) == 12
    assert MINE in registry._patched and THEIRS not in registry._patched
    assert "nvfp4_hook_probe_theirs" not in sys.modules  # apply_hooks() would import it
    registry.apply_hooks()  # when the other plugin applies its hooks, both work
    assert sys.modules["nvfp4_hook_probe_theirs"].compute(3) == 6
    assert sys.modules["nvfp4_hook_probe_mine"].compute(1) == 12
    assert registry._hooks[MINE][-1][2].plugin_name == PLUGIN_ENTRY_POINT


def test_a_target_another_plugin_already_applied_gets_our_hook_on_top(registry: type) -> None:
    from sglang.srt.plugins.hook_registry import HookType

    registry.register(MINE, double, HookType.AROUND)
    registry.apply_hooks()  # the other plugin applies its targets first
    registry._hooks.pop(THEIRS, None)
    assert sys.modules["nvfp4_hook_probe_mine"].compute(1) == 4
    installed = install_hook(MINE, add_ten)
    assert installed(1) == 14  # both hooks run once: (1 + 1) * 2 + 10
    registry.apply_hooks()  # a later apply_hooks() does not wrap the target again
    assert sys.modules["nvfp4_hook_probe_mine"].compute(1) == 14


def test_a_target_that_cannot_be_hooked_leaves_no_registration(registry: type) -> None:
    missing = "nvfp4_hook_probe_mine.missing"
    try:
        with pytest.raises(AttributeError, match="missing"):
            install_hook(missing, add_ten)
        assert not registry._hooks.get(missing) and missing not in registry._patched
    finally:
        registry._hooks.pop(missing, None)
