"""A copy of the SGLang under test as nightlies from the May-June 2026 window looked: the same
code and version string, with sglang#28144's FP8 KV-cache V-scale handoff reverted in
``trtllm_mha_backend.py`` (``bmm2_scale = 1.0`` again).

The copy links to the installed package: real directories only along the path to the one
edited file, one symbolic link for every other file or directory (a few dozen links, made in
milliseconds); put it first on ``PYTHONPATH`` and the interpreter imports it, dist-info
included.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

BACKEND = Path("srt", "layers", "attention", "trtllm_mha_backend.py")
# sglang#28144: `bmm1_scale, bmm2_scale = self._get_bmm_scales(layer, q_scale)`; later
# releases also compute `bmm2_scale = v_scale` on their NVFP4-KV path.
_HELPER_CALL = re.compile(
    r"^(?P<indent>[ \t]*)bmm1_scale, bmm2_scale = (?P<call>self\._get_bmm_scales\(.*\))[ \t]*$",
    re.MULTILINE,
)
_V_SCALE = re.compile(r"^(?P<indent>[ \t]*)bmm2_scale = v_scale[ \t]*$", re.MULTILINE)


def revert_scale_handoff(source: str) -> tuple[str, int]:
    """The backend source with every V-scale handoff replaced by the constant 1.0."""
    source, helper_calls = _HELPER_CALL.subn(
        r"\g<indent>bmm1_scale = \g<call>[0]\n\g<indent>bmm2_scale = 1.0", source
    )
    source, v_scales = _V_SCALE.subn(r"\g<indent>bmm2_scale = 1.0", source)
    return source, helper_calls + v_scales


def installed_package_dir() -> Path:
    spec = importlib.util.find_spec("sglang")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("SGLang is not importable")
    return Path(next(iter(spec.submodule_search_locations)))


def _link_all_but_the_path(source: Path, target: Path, path: Path) -> None:
    """Mirror ``source`` in ``target`` with one symbolic link per entry, except the
    directories along ``path``, which are made for real so its last file can be replaced."""
    target.mkdir(parents=True)
    for entry in source.iterdir():
        if len(path.parts) > 1 and entry.name == path.parts[0]:
            _link_all_but_the_path(entry, target / entry.name, Path(*path.parts[1:]))
        else:
            (target / entry.name).symlink_to(entry)


def make_bug_window_copy(
    target: Path, edit: Callable[[str], tuple[str, int]] = revert_scale_handoff
) -> Path:
    """Build the copy under ``target`` and return the directory to put on PYTHONPATH.

    ``edit`` rewrites the backend source and says how many places it changed (none is an
    error: the edit no longer fits this release)."""
    package = installed_package_dir()
    version = importlib.metadata.version("sglang")
    (dist_info,) = package.parent.glob(f"sglang-{version}.dist-info")
    _link_all_but_the_path(package, target / "sglang", BACKEND)
    shutil.copytree(dist_info, target / dist_info.name, copy_function=os.symlink)
    edited = target / "sglang" / BACKEND
    changed, count = edit((package / BACKEND).read_text(encoding="utf-8"))
    if count == 0:
        raise RuntimeError(f"{edit.__name__} found nothing to edit in {package / BACKEND}")
    edited.unlink()
    edited.write_text(changed, encoding="utf-8")
    return target
