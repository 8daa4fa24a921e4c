"""A fourth patch that sets a server-args default is one small module: its question, asked
through the seam. Here a question planted by the test (a stand-in patch that picks the
``pytorch`` sampling backend for Llama 4 where the operator gave none) is served by the same
hook as the patches' own, on whichever seam this release has, and every other launch resolves
as before."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sglang_nvfp4_patches.models import LLAMA4_ARCHITECTURES
from sglang_nvfp4_patches.server_args_seam import hooks
from sglang_nvfp4_patches.server_args_seam.launch import Launch
from sglang_nvfp4_patches.server_args_seam.question import Question
from support.configs import GEMMA4_NVFP4_MOE, LLAMA4_NVFP4
from support.gemma4_cases import resolved

pytestmark = pytest.mark.release_matrix

FIELD = "sampling_backend"
CAP = "pytorch"


@pytest.fixture
def planted(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str | None]]:
    """A fourth question asked through the seam for this test (the architectures it was
    asked about are yielded); the patches' own questions are put back afterwards."""
    asked: list[str | None] = []

    def cap(launch: Launch) -> str | None:
        asked.append(launch.architecture)
        return CAP if getattr(launch.view, FIELD) is None else None

    question = Question("fourth-patch", FIELD, cap, LLAMA4_ARCHITECTURES)
    monkeypatch.setattr(hooks, "_questions", list(hooks._questions))
    hooks.ask(question, now=True)
    assert hooks.times_asked(question) == 1  # the one hook, already on the seam
    yield asked


@pytest.fixture
def before() -> dict[str, dict]:
    """What each launch resolves to without the fourth question."""
    return {
        "llama4": resolved(LLAMA4_NVFP4, "sm100"),
        "gemma4": resolved(GEMMA4_NVFP4_MOE, "sm100"),
    }


def test_a_fourth_question_is_one_small_module(
    before: dict[str, dict], planted: list[str | None]
) -> None:
    assert before["llama4"][FIELD] != CAP
    llama4 = resolved(LLAMA4_NVFP4, "sm100")
    assert llama4 == {**before["llama4"], FIELD: CAP}  # its answer, and nothing else changed
    assert set(planted) <= LLAMA4_ARCHITECTURES and planted
    # the operator's flag stands
    assert resolved(LLAMA4_NVFP4, "sm100", sampling_backend="flashinfer")[FIELD] == "flashinfer"
    # another architecture is never asked about, and resolves as before
    planted.clear()
    assert resolved(GEMMA4_NVFP4_MOE, "sm100") == before["gemma4"]
    assert planted == []


def test_the_question_is_not_answered_where_sglang_resolves_alone(
    before: dict[str, dict], planted: list[str | None]
) -> None:
    """The seam's own suspension (SGLang's resolution alone, asked by a question that needs
    it) silences every question, the planted one too."""
    from sglang_nvfp4_patches.server_args_seam.launch import sglang_alone_suspension

    with sglang_alone_suspension.suspended():
        assert resolved(LLAMA4_NVFP4, "sm100")[FIELD] == before["llama4"][FIELD]
    assert planted == []
