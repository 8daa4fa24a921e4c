"""What an overlay of one SGLang release must carry besides ``sglang`` itself, read from the
release's own wheel (its ``Requires-Dist``), never from a hand-kept table:

    .venv/bin/python scripts/overlay_pins.py 0.5.21     # prints transformers==5.12.1 ...

An overlay runs the release's SGLang code on the primary environment's torch, FlashInfer and
kernels (that is what makes it cheap, and on CPU those are only imported). Of what the release
requires, the Hugging Face stack is what changes the answers of that code on CPU: its config
parsing (0.5.21 with the primary environment's transformers 5.19 fails on
``text_config.head_dim``). So the overlay takes the release's requirements on ``OVERLAID``
packages that the primary environment does not satisfy, and pip resolves them against the
primary environment, which adds whatever they need in turn (tokenizers <= 0.23.0 for
transformers 5.6.0 to 5.12.1). Every other requirement the primary environment does not meet is
named on stderr, so what differs from the release's own environment is never hidden.

Prints one ``name==version`` per line (nothing when the primary environment already fits).
Exit 0; 2 when pip cannot read the release or resolve its pins (one ``overlay_pins:`` line).
"""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

OVERLAID = ("transformers", "tokenizers")
# An overlay never carries these: the primary environment's builds are the ones that load here.
NEVER_OVERLAID = ("torch", "torchvision", "torchaudio")


class PinsError(Exception):
    """pip could not read the release or resolve what it pins."""


def installed_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def unmet(
    requires_dist: Iterable[str], installed: Callable[[str], str | None]
) -> list[Requirement]:
    """The release's unconditional requirements (markers evaluated here, no extras) that the
    primary environment does not satisfy, in the wheel's order."""
    missing = []
    for line in requires_dist:
        try:
            requirement = Requirement(line)
        except InvalidRequirement as error:
            raise PinsError(f"the wheel's Requires-Dist {line!r} does not parse: {error}") from None
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        have = installed(requirement.name)
        if have is None or not requirement.specifier.contains(have, prereleases=True):
            missing.append(requirement)
    return missing


def split(missing: list[Requirement]) -> tuple[list[Requirement], list[Requirement]]:
    """(the requirements the overlay carries, those left to the primary environment)."""
    overlaid = {canonicalize_name(name) for name in OVERLAID}
    carried = [r for r in missing if canonicalize_name(r.name) in overlaid]
    return carried, [r for r in missing if r not in carried]


def resolved_pins(report: dict) -> list[str]:
    """``name==version`` for each package in a ``pip install --dry-run --report`` answer,
    sorted by name; a resolution that would change torch is refused."""
    pins = []
    for item in report.get("install", []):
        name, version = item["metadata"]["name"], item["metadata"]["version"]
        if canonicalize_name(name) in NEVER_OVERLAID:
            raise PinsError(
                f"resolving the overlay's pins would install {name} {version}; an overlay runs "
                "on the primary environment's torch, so this release cannot be overlaid here"
            )
        pins.append(f"{canonicalize_name(name)}=={version}")
    return sorted(pins)


def pip_report(*requirements: str, no_deps: bool = False) -> dict:
    """What ``pip install`` would do in this environment, without doing it."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        command = [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet"]
        command += ["--no-deps"] if no_deps else []
        command += ["--report", str(report), *requirements]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0 or not report.is_file():
            tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise PinsError(f"pip could not resolve {' '.join(requirements)}: {tail}")
        return json.loads(report.read_text(encoding="utf-8"))


def describe(requirement: Requirement, installed: Callable[[str], str | None]) -> str:
    return f"{requirement} (here: {installed(requirement.name) or 'not installed'})"


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: overlay_pins.py SGLANG_RELEASE", file=sys.stderr)
        return 2
    release = argv[0]
    try:
        (wheel,) = pip_report(f"sglang=={release}", no_deps=True)["install"]
        missing = unmet(wheel["metadata"].get("requires_dist", []), installed_version)
        carried, left = split(missing)
        pins = resolved_pins(pip_report(*map(str, carried))) if carried else []
    except PinsError as error:
        print(f"overlay_pins: SGLang {release}: {error}", file=sys.stderr)
        return 2
    if left:
        print(
            f"overlay_pins: SGLang {release} runs on the primary environment's "
            + "; ".join(describe(r, installed_version) for r in left),
            file=sys.stderr,
        )
    for pin in pins:
        print(pin)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
