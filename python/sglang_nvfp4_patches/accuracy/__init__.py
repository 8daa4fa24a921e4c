"""MMLU-format accuracy A/B check (``run``, ``compare``, ``ab``) against an SGLang server.

Importing it imports neither SGLang nor torch nor aiohttp (loaded only by ``accuracy run``).
"""

from sglang_nvfp4_patches.accuracy.errors import (
    AccuracyError,
    BusyError,
    CompareError,
    ConfigError,
    DatasetError,
    ResumeError,
    RunFileError,
    ServerError,
)

__all__ = [
    "AccuracyError",
    "BusyError",
    "CompareError",
    "ConfigError",
    "DatasetError",
    "ResumeError",
    "RunFileError",
    "ServerError",
]
