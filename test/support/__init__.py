"""Test libraries (imported as ``support.*``); the fresh-interpreter scripts are in
:data:`SCRIPTS`, which tests run by path and never import."""

import json
import subprocess
from pathlib import Path
from typing import Any

SCRIPTS = Path(__file__).resolve().parent / "scripts"


def result_of(done: subprocess.CompletedProcess[str]) -> Any:
    """The one ``RESULT`` line of JSON a probe script printed."""
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert len(lines) == 1, done.stdout[-2000:] + done.stderr[-3000:]
    return json.loads(lines[0][len("RESULT ") :])
