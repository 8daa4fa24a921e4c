"""A fourth patch that sets a server-args default is one small module: its question, asked
through the seam. Here a question planted by the test (a stand-in patch that picks a
sampling backend for Llama 4, careless of the operator's flag) is served by the same hook as
the patches' own, on whichever seam this release has; the seam keeps the operator's flag, and
every other launch resolves as before."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sglang_nvfp4_patches.models import LLAMA4_ARCHITECTURES
from sglang_nvfp4_patches.server_args_seam import hooks
from sglang_nvfp4_patches.server_args_seam import question as questions
from sglang_nvfp4_patches.server_args_seam.launch import Launch
from support.configs import GEMMA4_NVFP4_MOE, LLAMA4_NVFP4
from support.gemma4_cases import resolved

pytestmark = pytest.mark.release_matrix

FIELD = "sampling_backend"
CHOICES = ("flashinfer", "pytorch")


@pytest.fixture
def before() -> dict[str, dict]:
    """What each launch resolves to without the fourth question."""
    return {
        "llama4": resolved(LLAMA4_NVFP4, "sm100"),
        "gemma4": resolved(GEMMA4_NVFP4_MOE, "sm100"),
    }


@pytest.fixture
def planted(
    before: dict[str, dict], monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, list[str | None]]]:
    """A fourth question asked through the seam for this test: the value it answers (not
    SGLang's own) and the architectures it was asked about; the patches' own questions are put
    back afterwards."""
    (value,) = [choice for choice in CHOICES if choice != before["llama4"][FIELD]]
    asked: list[str | None] = []

    def pick(launch: Launch) -> str | None:  # careless: never looks at the operator's flag
        asked.append(launch.architecture)
        return value

    monkeypatch.setattr(hooks, "_questions", list(hooks._questions))
    monkeypatch.setattr(questions, "REGISTERED", dict(questions.REGISTERED))
    questions.question("fourth-patch", FIELD, LLAMA4_ARCHITECTURES)(pick)
    assert hooks.ask("fourth-patch") is None
    assert hooks.times_asked("fourth-patch") == 1  # the one hook, already on the seam
    yield value, asked


def test_a_fourth_question_is_one_small_module(
    before: dict[str, dict], planted: tuple[str, list[str | None]]
) -> None:
    value, asked = planted
    llama4 = resolved(LLAMA4_NVFP4, "sm100")
    assert llama4 == {**before["llama4"], FIELD: value}  # its answer, and nothing else changed
    assert set(asked) <= LLAMA4_ARCHITECTURES and asked
    # the operator's flag stands, guarded by the seam, though the question answers otherwise
    given = before["llama4"][FIELD]
    asked.clear()
    assert resolved(LLAMA4_NVFP4, "sm100", **{FIELD: given})[FIELD] == given
    assert asked
    # another architecture is never asked about, and resolves as before
    asked.clear()
    assert resolved(GEMMA4_NVFP4_MOE, "sm100") == before["gemma4"]
    assert asked == []


def test_the_question_is_not_answered_where_sglang_resolves_alone(
    before: dict[str, dict], planted: tuple[str, list[str | None]]
) -> None:
    """The seam's own suspension (SGLang's resolution alone, asked by a question that needs
    it) silences every question, the planted one too."""
    from sglang_nvfp4_patches.server_args_seam.launch import sglang_alone_suspension

    with sglang_alone_suspension.suspended():
        assert resolved(LLAMA4_NVFP4, "sm100")[FIELD] == before["llama4"][FIELD]
    assert planted[1] == []


def test_a_second_question_on_one_field_is_refused_where_it_is_defined(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two questions on one field once ended silently as last-writer-wins."""
    monkeypatch.setattr(questions, "REGISTERED", dict(questions.REGISTERED))
    first = questions.question("fourth-patch", FIELD)(lambda launch: "pytorch")
    with pytest.raises(ValueError, match=r"\[fifth-patch\] asks about the ServerArgs field "):
        questions.question("fifth-patch", FIELD)(lambda launch: "flashinfer")
    assert questions.REGISTERED[FIELD] is first
    # a patch's own field too: the question already defined for it stays the only one
    with pytest.raises(ValueError, match=r"\[nvfp4-moe-runner\] already asks"):
        questions.question("fifth-patch", "moe_runner_backend")(lambda launch: "triton")
