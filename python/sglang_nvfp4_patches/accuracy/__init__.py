"""MMLU-format accuracy A/B check against a running SGLang server (pure HTTP client).

``run`` asks a server every question of an MMLU-format directory and records the answers;
``compare`` pairs two such runs by question id and applies McNemar's test, so the choice
between two server configurations (e.g. ``--attention-backend triton`` vs ``trtllm_mha``)
rests on a significance test rather than on two bare accuracy numbers.

Importing this package imports neither SGLang nor torch nor aiohttp (the HTTP client is
loaded only by ``accuracy run``).
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
