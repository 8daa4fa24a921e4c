"""Whether this user can make a file in a directory: a probe file, made and removed at once
(pure: no SGLang import)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def probe_write(directory: Path) -> None:
    """Make and remove a probe file in ``directory``; an OSError says why it cannot be written."""
    handle, probe = tempfile.mkstemp(prefix=".write-probe-", dir=directory)
    os.close(handle)
    os.unlink(probe)
