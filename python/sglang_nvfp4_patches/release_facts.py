"""The release facts: what CI settled by running each tested release's code on CPU, one row per
release in ``release_facts.txt`` (pure: no SGLang, no torch, no simulation at import): the
release, a fingerprint of the SGLang sources the questions run through (:data:`SOURCES`), by
which a server finds its row whatever its version string, and one cell per question. ``verify``
derives the cells again: they equal the shipped row, or are kept in this machine's records.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from sglang_nvfp4_patches.settings import RECORDS_ENV
from sglang_nvfp4_patches.supported_releases import is_tested

SHIPPED = Path(__file__).with_name("release_facts.txt")
KEPT_NAME = "release_facts.txt"
SHIPPED_BY = "CI"
KEPT_BY = "verify on this machine"
NOT_DERIVED = "~"  # a kept row's cell no verify check has derived yet
RELEASE, FINGERPRINT = "release", "fingerprint"
# The SGLang sources (files or directories under the package) every question runs through.
SOURCES: tuple[str, ...] = (
    "srt/arg_groups",
    "srt/server_args.py",
    "srt/configs/model_config.py",
    "srt/runtime_context.py",
    "srt/utils/common.py",
    "srt/layers/moe",
    "srt/layers/quantization",
    "srt/layers/dp_attention.py",
    "srt/layers/attention/trtllm_mha_backend.py",
    "srt/model_loader/weight_utils.py",
)


@dataclass(frozen=True)
class Row:
    release: str  # the version string SGLang's metadata gave where the row was made
    fingerprint: str
    cells: Mapping[str, str] = field(default_factory=dict)
    made_by: str = SHIPPED_BY

    def cell(self, column: str) -> str | None:
        """The cell of ``column``, ``None`` where the row has none yet."""
        value = self.cells.get(column)
        return None if value in (None, NOT_DERIVED) else value

    def origin(self, version: str) -> str:
        """``recorded by CI for SGLang 0.5.23`` (``, whose sources this build has``)."""
        made = f"recorded by {self.made_by} for SGLang {self.release}"
        return made if version == self.release else f"{made}, whose sources this build has"


class FactsConflict(RuntimeError):
    """A row for the same SGLang sources already says something else."""


def records_dir() -> Path:
    given = os.environ.get(RECORDS_ENV)
    if given:
        return Path(given)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "sglang-nvfp4-patches" / "records"


def parse(text: str, made_by: str = SHIPPED_BY) -> tuple[tuple[str, ...], list[Row]]:
    """The columns (after release and fingerprint) and rows of a facts table."""
    lines = [line.split() for line in text.splitlines() if line.strip() and line[0] != "#"]
    if not lines or lines[0][:2] != [RELEASE, FINGERPRINT]:
        return (), []
    columns = tuple(lines[0][2:])
    rows = [
        Row(words[0], words[1], dict(zip(columns, words[2:], strict=True)), made_by)
        for words in lines[1:]
        if len(words) == len(columns) + 2
    ]
    return columns, rows


def render(columns: Iterable[str], rows: Iterable[Row], legend: str = "") -> str:
    """The table, its columns aligned, after ``legend`` (``#`` lines)."""
    names = (RELEASE, FINGERPRINT, *columns)
    table = [list(names)] + [
        [row.release, row.fingerprint, *(row.cells.get(c, NOT_DERIVED) for c in names[2:])]
        for row in rows
    ]
    widths = [max(len(line[i]) for line in table) for i in range(len(names))]
    body = ["  ".join(w.ljust(widths[i]) for i, w in enumerate(line)).rstrip() for line in table]
    return legend + "\n".join(body) + "\n"


def _read(path: Path, made_by: str) -> tuple[tuple[str, ...], list[Row]]:
    try:
        return parse(path.read_text(), made_by)
    except (OSError, UnicodeDecodeError):
        return (), []


@functools.cache
def fingerprint_at(roots: tuple[str, ...], sources: tuple[str, ...] = SOURCES) -> str:
    """16 hex digits of the SHA-256 of ``sources`` under ``roots`` (an absent one: its name)."""
    digest = hashlib.sha256()
    for source in sources:
        root = next((Path(r) for r in roots if (Path(r) / source).exists()), None)
        if root is None:
            digest.update(f"{source}\0<absent>\0".encode())
            continue
        path = root / source
        for file in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            digest.update(f"{file.relative_to(root)}\0".encode())
            digest.update(hashlib.sha256(file.read_bytes()).digest())
    return digest.hexdigest()[:16]


def fingerprint() -> str:
    """The fingerprint of the SGLang this interpreter imports (its package's directories in
    import order: a copy put first leads)."""
    import importlib.util
    import sys

    imported = sys.modules.get("sglang")
    if imported is not None and getattr(imported, "__path__", None):
        return fingerprint_at(tuple(imported.__path__))
    spec = importlib.util.find_spec("sglang")
    return fingerprint_at(tuple(spec.submodule_search_locations or ()) if spec else ())


def shipped_rows() -> list[Row]:
    """The rows CI settled, shipped with the package (none where the file cannot be read)."""
    return _read(SHIPPED, SHIPPED_BY)[1]


def find_row(version: str, wanted: str) -> Row | None:
    """The row whose fingerprint is ``wanted``: shipped first, then kept, ``version``'s first."""
    rows = shipped_rows() + _read(records_dir() / KEPT_NAME, KEPT_BY)[1]
    found = [row for row in rows if row.fingerprint == wanted]
    found.sort(key=lambda row: (row.made_by != SHIPPED_BY, row.release != version))
    return found[0] if found else None


def current_row() -> Row | None:
    """The row for the SGLang this process imported, if any."""
    from sglang_nvfp4_patches.supported_releases import sglang_version

    return find_row(sglang_version(), fingerprint())


def release_with_these_sources() -> str | None:
    """The tested release whose shipped row has this SGLang's sources, if any (the release
    gate's question)."""
    try:
        row = current_row()
    except Exception:  # sources that cannot be read are no tested release's: untested
        return None
    if row is None or row.made_by != SHIPPED_BY or not is_tested(row.release):
        return None
    return row.release


def keep(version: str, cells: Mapping[str, str]) -> Path:
    """Add ``cells`` to this machine's row for these sources (a different cell is refused)."""
    path = records_dir() / KEPT_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(f"{KEPT_NAME}.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # verify's checks keep their cells at once
        wanted = fingerprint()
        columns, rows = _read(path, KEPT_BY)
        old = next((row for row in rows if row.fingerprint == wanted), None)
        merged = dict(old.cells) if old else {}
        for column, value in cells.items():
            if merged.get(column, NOT_DERIVED) not in (NOT_DERIVED, value):
                raise FactsConflict(
                    f"{path} already says {column} {merged[column]} for these SGLang sources; "
                    "delete its row to keep this verify run's"
                )
            merged[column] = value
        if old is not None and merged == dict(old.cells):
            return path
        columns = tuple(dict.fromkeys([*columns, *cells]))
        row = Row(old.release if old else version, wanted, merged, KEPT_BY)
        rows = [r for r in rows if r.fingerprint != wanted] + [row]
        partial = path.with_name(f"{KEPT_NAME}.{os.getpid()}.partial")
        partial.write_text(render(columns, rows, "# kept by `verify` on this machine\n"))
        os.replace(partial, path)
        return path
