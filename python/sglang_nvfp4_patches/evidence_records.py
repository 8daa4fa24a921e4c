"""Evidence a patch gathered by running SGLang's code on CPU, kept for the servers that need it
(pure: no SGLang, no torch at import).

Some facts take seconds of CPU simulation to establish (build a layer, load and process its
weights, run one forward); a server must not pay that at every start. ``verify`` runs the
simulation and writes a **record**: the patch, the SGLang version it ran on, a fingerprint of
the SGLang sources the simulation runs through, and the facts it found. A server process reads
the record whose fingerprint matches the sources of the SGLang it imported, whatever version
the record was made for (a local, pre- or post-release build of a tested release with that
release's sources gets its record), and acts on its facts; with none, the patch cannot tell
(``unknown``) and ``doctor`` says to run ``verify``.

Records come from two places: the ones CI produced for every tested release, shipped inside
the patch's package (``verified_releases.json``, checked against a fresh simulation by
``verify`` on each release in CI), and the ones ``verify`` wrote on this machine
(``$SGLANG_NVFP4_PATCHES_RECORDS``, else ``~/.cache/sglang-nvfp4-patches/records``).
Any edit to a fingerprinted source matches no record. The same sources under a version string
outside the tested window, where every patch that decides from records finds CI's for one
tested release, are that release (:func:`release_with_these_sources`).
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

from sglang_nvfp4_patches.settings import RECORDS_ENV
from sglang_nvfp4_patches.supported_releases import is_tested

SHIPPED_NAME = "verified_releases.json"
SHIPPED_BY = "CI"  # who made the records shipped in the package
KEPT_BY = "verify on this machine"  # who made the ones kept in records_dir()


@dataclass(frozen=True)
class Record:
    patch: str
    sglang: str  # the version string SGLang's metadata gave where it was made
    fingerprint: str
    made_by: str  # SHIPPED_BY or KEPT_BY
    facts: Mapping[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)

    def origin(self, version: str) -> str:
        """Where it comes from, said on SGLang ``version``: ``recorded by CI for SGLang
        0.5.23``, and ``, whose sources this build has`` where ``version`` is another."""
        made = f"recorded by {self.made_by} for SGLang {self.sglang}"
        return made if version == self.sglang else f"{made}, whose sources this build has"


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
    """The record for ``patch`` whose fingerprint is that of ``sources`` under ``roots`` (by
    default the imported package's), shipped or written here, whatever version it was made
    for: the shipped ones first, and of each, one made for ``version`` first; ``None`` when
    there is none. The sources are only hashed when some record of ``patch`` exists."""
    candidates = [(item, SHIPPED_BY) for item in _read(shipped)] + [
        (item, KEPT_BY) for path in _local_files(patch) for item in _read(path)
    ]
    candidates = [
        (item, origin)
        for item, origin in candidates
        if item.get("patch") == patch
        and isinstance(item.get("sglang"), str)
        and isinstance(item.get("facts"), dict)
    ]
    if not candidates:
        return None
    wanted = fingerprint_at(_sglang_roots() if roots is None else roots, sources)
    candidates.sort(key=lambda found: (found[1] != SHIPPED_BY, found[0]["sglang"] != version))
    for item, origin in candidates:
        if item.get("fingerprint") == wanted:
            return Record(patch, item["sglang"], wanted, origin, item["facts"])
    return None


def release_with_these_sources(records: Iterable[Record | None]) -> str | None:
    """The tested release whose shipped records ``records`` all are: each patch that decides
    from records (its record for this SGLang, :func:`find_record`) found CI's, made for one
    tested release. ``None`` where a record is missing, kept by ``verify``, or made for
    another release than the others'."""
    found = list(records)
    releases = {record.sglang for record in found if record is not None}
    if not found or len(releases) != 1:
        return None
    (release,) = releases
    shipped = all(record is not None and record.made_by == SHIPPED_BY for record in found)
    return release if shipped and is_tested(release) else None


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
