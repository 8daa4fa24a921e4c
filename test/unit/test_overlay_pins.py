"""``scripts/overlay_pins.py`` on hand-written ``Requires-Dist`` lines and pip reports: what an
overlay carries is read from the release's wheel, and nothing else changes.

The real wheels are read by ``scripts/build_overlay.sh`` on every release CI runs.
"""

from __future__ import annotations

import pytest

from support.repo_scripts import load_script

overlay_pins = load_script("overlay_pins")

# Requires-Dist as 0.5.21's wheel writes them (an excerpt), and a primary environment like ours.
RELEASE = [
    "torch==2.13.0",
    "transformers==5.12.1",
    "tokenizers==0.22.2",
    "openai==2.6.1",
    "numpy",
    'tomli; python_version < "3.11"',
    'decord2; sys_platform == "linux" and platform_machine == "aarch64"',
    'pytest; extra == "test"',
    "kernels<0.15,>=0.14.1",
]
PRIMARY = {
    "torch": "2.14.1",
    "transformers": "5.19.0",
    "tokenizers": "0.23.2",
    "openai": "2.8.0",
    "numpy": "2.3.0",
    "kernels": "0.14.2",
}


def names(requirements: list) -> list[str]:
    return [r.name for r in requirements]


def test_unmet_keeps_what_the_primary_environment_does_not_satisfy_in_wheel_order() -> None:
    missing = overlay_pins.unmet(RELEASE, PRIMARY.get)
    assert names(missing) == ["torch", "transformers", "tokenizers", "openai"]


def test_a_requirement_missing_here_is_unmet_and_markers_for_elsewhere_are_not() -> None:
    primary = {k: v for k, v in PRIMARY.items() if k != "numpy"}
    assert "numpy" in names(overlay_pins.unmet(RELEASE, primary.get))
    assert "tomli" not in names(overlay_pins.unmet(RELEASE, {}.get))  # python_version < 3.11
    assert "pytest" not in names(overlay_pins.unmet(RELEASE, {}.get))  # an extra's


def test_only_the_hugging_face_stack_is_carried() -> None:
    carried, left = overlay_pins.split(overlay_pins.unmet(RELEASE, PRIMARY.get))
    assert names(carried) == ["transformers", "tokenizers"]
    assert names(left) == ["torch", "openai"]


def test_a_release_whose_pins_the_primary_environment_meets_carries_nothing() -> None:
    primary = {**PRIMARY, "transformers": "5.12.1", "tokenizers": "0.22.2"}
    carried, _ = overlay_pins.split(overlay_pins.unmet(RELEASE, primary.get))
    assert carried == []


def test_a_requirement_that_does_not_parse_is_named() -> None:
    with pytest.raises(overlay_pins.PinsError, match=r"'transformers=5\.12\.1'"):
        overlay_pins.unmet(["transformers=5.12.1"], PRIMARY.get)


def report(*packages: tuple[str, str]) -> dict:
    return {"install": [{"metadata": {"name": n, "version": v}} for n, v in packages]}


def test_resolved_pins_are_every_package_pip_would_install_sorted() -> None:
    answer = report(("Transformers", "5.6.0"), ("tokenizers", "0.22.2"), ("huggingface_hub", "1.0"))
    assert overlay_pins.resolved_pins(answer) == [
        "huggingface-hub==1.0",
        "tokenizers==0.22.2",
        "transformers==5.6.0",
    ]


def test_a_resolution_that_would_change_torch_is_refused() -> None:
    with pytest.raises(overlay_pins.PinsError, match=r"torch 2\.11\.0"):
        overlay_pins.resolved_pins(report(("transformers", "9.0"), ("torch", "2.11.0")))
