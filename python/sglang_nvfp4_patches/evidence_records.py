"""Evidence a patch gathered by running SGLang's code on CPU, kept for the servers that need it
(pure: no SGLang, no torch at import).

Some facts take seconds of CPU simulation to establish (build a layer, load and process its
weights, run one forward); a server must not pay that at every start. ``verify`` runs the
simulation and writes a **record**: the patch, the SGLang version, a fingerprint of the SGLang
sources the simulation runs through, and the facts it found. A server process reads the record
whose version and fingerprint match the SGLang it imported, and acts on its facts; with none,
the patch cannot tell (``unknown``) and ``doctor`` says to run ``verify``.

Records come from two places: the ones CI produced for every tested release, shipped inside
the patch's package (``verified_releases.json``, checked against a fresh simulation by
``verify`` on each release in CI), and the ones ``verify`` wrote on this machine
(``$SGLANG_NVFP4_PATCHES_RECORDS``, else ``~/.cache/sglang-nvfp4-patches/records``).
Any edit to a fingerprinted source, or another version string, matches no record.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

RECORDS_ENV = "SGLANG_NVFP4_PATCHES_RECORDS"
SHIPPED_NAME = "verified_releases.json"


@dataclass(frozen=True)
class Record:
    patch: str
    sglang: str  # the version string SGLang's metadata gives
    fingerprint: str
    made_by: str  # "CI" (shipped) or "verify on this machine"
    facts: Mapping[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


class RecordConflict(RuntimeError):
    """A record for the same SGLang sources already says something else."""


def records_dir() -> Path:
    """Where ``verify`` keeps the records it writes on this machine."""
    given = os.environ.get(RECORDS_ENV)
    if given:
        return Path(given)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "sglang-nvfp4-patches" / "records"


def _sglang_roots() -> tuple[str, ...]:
    """The ``sglang`` package's directories in import order (the imported package's own
    ``__path__``, which a copy put first on it leads)."""
    import importlib.util
    import sys

    imported = sys.modules.get("sglang")
    if imported is not None and getattr(imported, "__path__", None):
        return tuple(imported.__path__)
    spec = importlib.util.find_spec("sglang")
    return tuple(spec.submodule_search_locations or ()) if spec else ()


def _files(roots: tuple[str, ...], sources: Iterable[str]) -> list[tuple[str, Path]]:
    """``(relative path, file)`` of every ``.py`` file of each source (a file or a directory
    under the ``sglang`` package), taken from the first root that has the source."""
    found: list[tuple[str, Path]] = []
    for source in sources:
        root = next((Path(r) for r in roots if (Path(r) / source).exists()), None)
        if root is None:
            found.append((source, Path()))  # absent: its absence is part of the fingerprint
            continue
        path = root / source
        files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
        found.extend((str(file.relative_to(root)), file) for file in files)
    return found


@functools.cache
def fingerprint_at(roots: tuple[str, ...], sources: tuple[str, ...]) -> str:
    """The SHA-256 of ``sources`` (paths under the package) as found under ``roots``, the
    package's directories in import order."""
    digest = hashlib.sha256()
    for relative, file in _files(roots, sources):
        digest.update(relative.encode())
        digest.update(b"\0")
        content = file.read_bytes() if file.is_file() else b"<absent>"
        digest.update(hashlib.sha256(content).digest())
    return digest.hexdigest()


def fingerprint(sources: tuple[str, ...]) -> str:
    """The SHA-256 of the installed SGLang's ``sources`` (paths under the package), as the
    interpreter would import them (the first ``sglang`` root that has each)."""
    return fingerprint_at(_sglang_roots(), sources)


def _read(path: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    items = data.get("records", []) if isinstance(data, dict) else []
    return [item for item in items if isinstance(item, dict)]


def _local_files(patch: str) -> list[Path]:
    try:
        return sorted(records_dir().glob(f"{patch}-*.json"))
    except OSError:
        return []


def find_record(
    patch: str,
    version: str,
    sources: tuple[str, ...],
    shipped: Path,
    roots: tuple[str, ...] | None = None,
) -> Record | None:
    """The record for ``patch`` on this SGLang (``version`` and the fingerprint of
    ``sources`` under ``roots``, by default the imported package's), shipped or written here;
    ``None`` when there is none. The sources are only hashed when some record names this
    version."""
    candidates = [(item, "CI") for item in _read(shipped) if item.get("sglang") == version] + [
        (item, "verify on this machine")
        for path in _local_files(patch)
        for item in _read(path)
        if item.get("sglang") == version
    ]
    candidates = [(item, origin) for item, origin in candidates if item.get("patch") == patch]
    if not candidates:
        return None
    wanted = fingerprint_at(_sglang_roots() if roots is None else roots, sources)
    for item, origin in candidates:
        if item.get("fingerprint") == wanted and isinstance(item.get("facts"), dict):
            return Record(patch, version, wanted, origin, item["facts"])
    return None


def write_record(record: Record) -> Path:
    """Keep ``record`` on this machine. The same record again writes nothing; a different one
    for the same sources is refused (:class:`RecordConflict`), never overwritten."""
    directory = records_dir()
    path = directory / f"{record.patch}-{record.sglang}-{record.fingerprint[:16]}.json"
    body = {"records": [record.as_json()]}
    existing = _read(path)
    if existing:
        if existing[0].get("facts") == dict(record.facts):
            return path
        raise RecordConflict(
            f"{path} already records other facts for these SGLang sources; delete it to "
            "record this verify run's"
        )
    directory.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.partial")
    partial.write_text(json.dumps(body, indent=1, sort_keys=True) + "\n")
    os.replace(partial, path)
    return path
