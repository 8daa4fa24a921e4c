"""Test libraries (imported as ``support.*``); the fresh-interpreter scripts are in
:data:`SCRIPTS`, which tests run by path and never import."""

from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent / "scripts"
