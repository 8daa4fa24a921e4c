"""One hook per target serving every patch's question (:mod:`.question`): a registry provider
under a predicate every architecture meets (run after the architecture's own, so it wins), or
an AROUND hook on ``_handle_model_specific_adjustments``; and one on ``Scheduler.__init__`` for
records resolved before plugins loaded. Each call reads one shared :class:`.launch.Launch`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any

from sglang_nvfp4_patches.patch_report import PatchUnavailable, log_not_applied
from sglang_nvfp4_patches.post_import import when_imported
from sglang_nvfp4_patches.server_args_seam.launch import (
    PREDICATES,
    Launch,
    sglang_alone_suspension,
)
from sglang_nvfp4_patches.server_args_seam.question import Question, questions_of
from sglang_nvfp4_patches.server_args_seam.seam import (
    ADJUSTMENTS_TARGET,
    OverrideSeam,
    SeamKind,
    find_override_seam,
    seam_module,
)
from sglang_nvfp4_patches.sglang_hooks import PATCHED_MARK, bound_at, hook_count, install_hook

logger = logging.getLogger("sglang_nvfp4_patches.server_args_seam")
REGISTER_PREDICATE = "register_model_override_predicate"
SCHEDULER_MODULE = "sglang.srt.managers.scheduler"
SCHEDULER_INIT = f"{SCHEDULER_MODULE}.Scheduler.__init__"

_questions: list[Question] = []  # the questions asked: their patches are installed
_seam: OverrideSeam | None = None  # the seam the hook is on


def every_architecture(_architecture: str) -> bool:
    """The provider's predicate: each question says which architectures it asks about."""
    return True


def _answers(launch: Launch, questions: Iterable[Question]) -> dict[str, Any]:
    """Each question's answer, but for a field the operator set: asked all the same (its log
    lines may concern the operator's choice), its answer is dropped and the operator's stands."""
    if sglang_alone_suspension.active():
        return {}
    answers: dict[str, Any] = {}
    for question in questions:
        if not question.is_suspended() and question.asks_about(launch.architecture):
            value = question.answer(launch)
            if value is not None and not launch.operator_gave(question.field):
                answers[question.field] = value
    return answers


def _current_seam() -> OverrideSeam:
    return _seam or find_override_seam()


def registry_provider(server_args: Any, hf_config: Any) -> dict[str, Any]:
    """The provider in a model-override registry: every answer, as a declaration."""
    return _answers(Launch(server_args, _current_seam(), hf_config), _questions)


def _set_answers(server_args: Any, before: bool, given: dict[str, Any]) -> None:
    asked = [q for q in _questions if q.before_adjustments is before]
    launch = Launch(server_args, _current_seam(), given=given)
    for field, value in _answers(launch, asked).items():
        setattr(server_args, field, value)


def adjustments_hook(original: Callable[..., Any], server_args: Any, *args: Any, **kw: Any) -> Any:
    """Each answer set on the record before or after SGLang's in-place model adjustments; the
    operator's values are the record's as the hook is entered."""
    given = {q.field: getattr(server_args, q.field, None) for q in _questions}
    _set_answers(server_args, before=True, given=given)
    result = original(server_args, *args, **kw)
    _set_answers(server_args, before=False, given=given)
    return result


setattr(registry_provider, PATCHED_MARK, True)


def check_record(record: Any) -> bool:
    """Every question's check of a record resolved before plugins loaded; whether one warned."""
    launch = Launch.resolved(record)
    return any([q.check_record(launch) for q in _questions if q.check_record is not None])


def scheduler_init_hook(original: Callable[..., Any], scheduler: Any, *args: Any, **kw: Any) -> Any:
    server_args = kw.get("server_args", args[0] if args else None)
    if server_args is not None:
        try:
            check_record(server_args)
        except Exception as error:  # a diagnostic must never stop the scheduler
            logger.debug("record check skipped: %s", error)
    return original(scheduler, *args, **kw)


def _hook_scheduler(module: ModuleType) -> None:
    if hasattr(getattr(module, "Scheduler", None), "__init__"):
        install_hook(SCHEDULER_INIT, scheduler_init_hook)


def _registered(seam: OverrideSeam) -> list[Any]:
    return [provider for _, provider in getattr(seam.module, PREDICATES, ())]


def _wire() -> None:
    """Put the hook on this SGLang's seam, once (:class:`PatchUnavailable`: it cannot)."""
    global _seam
    seam = find_override_seam()
    if seam.kind is SeamKind.ADJUSTMENTS_METHOD:
        install_hook(ADJUSTMENTS_TARGET, adjustments_hook)
    else:
        register = getattr(seam.module, REGISTER_PREDICATE, None)
        if register is None or not isinstance(getattr(seam.module, PREDICATES, None), list):
            raise PatchUnavailable(
                f"the {seam.kind.value} has no {REGISTER_PREDICATE}, so no provider reaches every "
                "architecture"
            )
        if registry_provider not in _registered(seam):
            register(every_architecture)(registry_provider)
    _seam = seam


def ask(patch: str) -> str | None:
    """Serve ``patch``'s questions from the hook (idempotent) as SGLang imports the seam; a seam
    that cannot be hooked then logs one ERROR (returned where it was imported already)."""
    asked = questions_of(patch)
    _questions.extend(question for question in asked if question not in _questions)
    failures: list[str] = []

    def wire(_module: ModuleType) -> None:
        try:
            _wire()
        except PatchUnavailable as error:
            failures.append(str(error))
            log_not_applied(logger, patch, error)

    when_imported(seam_module(), wire)
    if any(question.check_record is not None for question in asked):
        when_imported(SCHEDULER_MODULE, _hook_scheduler)
    return failures[0] if failures else None


def wired() -> bool:
    """Whether the hook is on this SGLang's seam already."""
    return _seam is not None


def times_asked(patch: str) -> int:
    """How many times the hook serving ``patch``'s questions is on the seam (0: not asked)."""
    if not any(question.patch == patch for question in _questions):
        return 0
    seam = _current_seam()
    if seam.kind is SeamKind.ADJUSTMENTS_METHOD:
        return hook_count(bound_at(ADJUSTMENTS_TARGET), adjustments_hook)
    return _registered(seam).count(registry_provider)


def where() -> str:
    """The seam the hook is on, by name (``doctor``)."""
    return _current_seam().kind.value
