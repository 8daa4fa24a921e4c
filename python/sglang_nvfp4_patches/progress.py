"""What a long command shows on stderr while it works, only when stderr is a terminal (pure):
one line when slow work starts, and a tqdm bar over a known number of steps.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from typing import Protocol, TypeVar

T = TypeVar("T")


class Progress(Protocol):
    def update(self, n: int = 1) -> object: ...

    def close(self) -> None: ...


class _NoProgress:
    def update(self, n: int = 1) -> None:
        return None

    def close(self) -> None:
        return None


def announce(line: str) -> None:
    """``line`` on stderr when stderr is a terminal; nothing otherwise."""
    if sys.stderr.isatty():
        print(line, file=sys.stderr, flush=True)


def progress_bar(total: int, unit: str, show: bool | None = None, initial: int = 0) -> Progress:
    """A tqdm bar on stderr; ``show`` None: only when stderr is a terminal."""
    if not (sys.stderr.isatty() if show is None else show):
        return _NoProgress()
    from tqdm import tqdm

    return tqdm(total=total, initial=initial, unit=unit, file=sys.stderr, mininterval=0.5)


def tracked(items: Iterable[T], total: int, unit: str) -> Iterator[T]:
    """``items``, advancing a :func:`progress_bar` (terminal only) per item."""
    bar = progress_bar(total, unit)
    try:
        for item in items:
            yield item
            bar.update(1)
    finally:
        bar.close()
