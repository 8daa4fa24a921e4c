"""Adds the stand-in patch in every interpreter started with this folder on ``PYTHONPATH``
(``verify``'s check processes, started by the process ``standin_probe.py`` runs in)."""

import standin_added  # noqa: F401
