"""Test helpers for the accuracy tool: an MMLU-format dataset writer and a scripted server."""

from pathlib import Path

# Subprocess tests put the package sources first on PYTHONPATH.
PYTHON_DIR = Path(__file__).resolve().parents[2] / "python"
