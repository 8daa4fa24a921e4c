"""Which pytest process this is, under pytest-xdist (pyproject's ``addopts``: ``-n 2``)."""

from __future__ import annotations

import pytest


def distributes_only(config: pytest.Config) -> bool:
    """Whether this process is pytest-xdist's controller: it hands the tests to its workers
    and runs none itself (so it starts no fork server and makes no records directory)."""
    return config.getoption("dist", "no") != "no" and not is_worker(config)


def is_worker(config: pytest.Config) -> bool:
    """Whether this process is a pytest-xdist worker, which learns its tests one by one."""
    return hasattr(config, "workerinput")
