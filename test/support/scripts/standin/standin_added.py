"""The stand-in patch's one line in ``patches.py``: added to ``PATCHES`` before anything of
the plugin reads it (imported by ``sitecustomize`` in every process started with this folder
on ``PYTHONPATH``, and by ``standin_probe.py`` in the forked process)."""

from __future__ import annotations

from nvfp4_standin_patch import PATCH

from sglang_nvfp4_patches import patches

patches.PATCHES = (*patches.PATCHES, PATCH)
