"""``--use-ray``: SGLang's Ray scheduler actors never load plugins.

``SchedulerActor.__init__`` (``sglang/srt/ray/scheduler_actor.py``) builds the ``Scheduler``
inside a Ray worker process without calling ``load_plugins()`` (the forked scheduler's
``run_scheduler_process`` does call it). Nothing of SGLang's runs in that process before the
model is built that a plugin could hook from the driver, so the MoE halves of
``llama4-router-weight`` never reach the processes that run the model. The driver says so
with one WARNING when a ``ServerArgs`` with ``use_ray`` is built, and ``doctor`` mentions it.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from sglang_nvfp4_patches.status import sglang_version

PATCH_NAME = "llama4-router-weight"
ACTOR_FILE = Path("srt", "ray", "scheduler_actor.py")
SERVER_ARGS_MODULE = "sglang.srt.server_args"
logger = logging.getLogger("sglang_nvfp4_patches.llama4_router_weight")

_warned = threading.Event()


def actors_skip_plugins() -> bool:
    """Whether this SGLang has Ray scheduler actors that do not load plugins (read from the
    actor's source file: importing it needs Ray, which most installs lack)."""
    import sglang

    for root in sglang.__path__:
        actor = Path(root) / ACTOR_FILE
        if actor.is_file():
            return "load_plugins" not in actor.read_text(encoding="utf-8")
    return False


def warning_text() -> str:
    return (
        f"[{PATCH_NAME}] --use-ray: SGLang {sglang_version()} builds its Ray scheduler "
        "actors (sglang.srt.ray.scheduler_actor.SchedulerActor) without loading plugins, so "
        "the Llama 4 router-weight fix is not applied in the processes that run the model: "
        "a Llama 4 NVFP4 model on the FlashInfer CUTLASS MoE runner is still rejected there "
        "at warm-up. Launch without --use-ray to get the fix."
    )


def _warn_if_ray(result: Any, server_args: Any, *_args: Any, **_kwargs: Any) -> None:
    """AFTER hook on the step that resolves a ``ServerArgs``: one WARNING per process."""
    if getattr(server_args, "use_ray", False) and not _warned.is_set():
        _warned.set()
        logger.warning(warning_text())


def resolution_step(server_args_cls: type) -> str:
    """Where this release resolves a ``ServerArgs``: ``resolve_once`` (0.5.20+, called by
    every launcher; ``ServerArgs`` is a msgspec struct there, which binds ``__post_init__``
    when the class is made, so rebinding it would never run), else ``__post_init__``."""
    return "resolve_once" if hasattr(server_args_cls, "resolve_once") else "__post_init__"


def _hook_server_args(module: Any) -> None:
    from sglang_nvfp4_patches.sglang_hooks import install_hook

    try:
        step = resolution_step(module.ServerArgs)
        install_hook(f"{SERVER_ARGS_MODULE}.ServerArgs.{step}", _warn_if_ray, "after")
    except Exception as error:  # the warning is a courtesy; never break SGLang's import
        logger.error(
            "[%s] could not install the --use-ray warning on SGLang %s: %s: %s",
            PATCH_NAME,
            sglang_version(),
            type(error).__name__,
            error,
        )


def install() -> None:
    """Warn from the driver when ``use_ray`` is set, on releases whose actors skip plugins."""
    from sglang_nvfp4_patches.post_import import when_imported

    if actors_skip_plugins():
        when_imported(SERVER_ARGS_MODULE, _hook_server_args)


def doctor_note() -> str | None:
    if not actors_skip_plugins():
        return None
    return (
        "--use-ray: not applied in Ray scheduler actors (SGLang's SchedulerActor does not "
        "load plugins; the driver warns)"
    )
