"""Our hooks go through SGLang's real ``HookRegistry`` wrapper and leave other plugins'
hooks alone."""

from __future__ import annotations

import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sglang_nvfp4_patches.sglang_hooks import hook_count, install_hook

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


def test_only_our_target_is_wrapped_and_nothing_is_recorded(registry: type) -> None:
    from sglang.srt.plugins.hook_registry import HookType

    registry.register(THEIRS, double, HookType.AROUND)  # another plugin, not applied yet
    install_hook(MINE, add_ten)
    assert sys.modules["nvfp4_hook_probe_mine"].compute(1) == 12
    assert "nvfp4_hook_probe_theirs" not in sys.modules  # apply_hooks() would import it
    # Nothing recorded: apply_hooks() neither skips MINE for later plugins nor re-applies ours.
    assert MINE not in registry._patched and MINE not in registry._hooks
    registry.apply_hooks()  # when the other plugin's hooks are applied, both work
    assert sys.modules["nvfp4_hook_probe_theirs"].compute(3) == 6
    assert sys.modules["nvfp4_hook_probe_mine"].compute(1) == 12


def test_a_hook_registered_after_ours_is_still_applied_once(registry: type) -> None:
    from sglang.srt.plugins.hook_registry import HookType

    install_hook(MINE, add_ten)  # ours first (its module was imported early)
    registry.register(MINE, double, HookType.AROUND)  # a plugin loaded after ours
    registry.apply_hooks()
    registry.apply_hooks()  # load_plugins() may run again: still once each
    compute = sys.modules["nvfp4_hook_probe_mine"].compute
    assert compute(1) == 24  # (1 + 1 + 10) * 2: theirs outside ours, each once
    assert hook_count(compute, double) == 1 and hook_count(compute, add_ten) == 1


def test_a_target_another_plugin_already_applied_gets_our_hook_on_top(registry: type) -> None:
    from sglang.srt.plugins.hook_registry import HookType

    registry.register(MINE, double, HookType.AROUND)
    registry.apply_hooks()  # the other plugin applies its targets first
    registry._hooks.pop(THEIRS, None)
    assert sys.modules["nvfp4_hook_probe_mine"].compute(1) == 4
    install_hook(MINE, add_ten)
    installed = sys.modules["nvfp4_hook_probe_mine"].compute
    assert installed(1) == 14  # both hooks run once: (1 + 1) * 2 + 10
    install_hook(MINE, add_ten)
    assert sys.modules["nvfp4_hook_probe_mine"].compute is installed  # again: nothing changes
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
