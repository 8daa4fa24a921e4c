"""``--use-ray``: the plugin reaches SGLang's Ray scheduler actors only through the Ray job.

``SchedulerActor`` builds the ``Scheduler`` in a Ray worker without ``load_plugins()``, in
the job's runtime env; a job-level ``worker_process_setup_hook`` of
``sglang.srt.plugins.load_plugins`` loads the plugin there (README, "Ray"). A post-import
callback on ``sglang.srt.ray.engine`` (imported only on SGLang's Ray path) warns when the hook
is missing, reading the job's runtime env from a running Ray or ``ray job submit``'s job
config; it never imports Ray.
"""

from __future__ import annotations

import enum
import json
import logging
import os
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sglang_nvfp4_patches.llama4_router_weight.rule import NAME
from sglang_nvfp4_patches.sglang_hooks import PLUGIN_ENTRY_POINT
from sglang_nvfp4_patches.supported_releases import sglang_version

ACTOR_FILE = Path("srt", "ray", "scheduler_actor.py")
RAY_ENGINE_MODULE = "sglang.srt.ray.engine"
SETUP_HOOK = "sglang.srt.plugins.load_plugins"
SETUP_HOOK_CALLABLE_NAME = "load_plugins"  # what Ray keeps of a hook given as a callable
SETUP_HOOK_ENV = "__RAY_WORKER_PROCESS_SETUP_HOOK_ENV_VAR"  # where Ray's workers read it
JOB_CONFIG_ENV = "RAY_JOB_CONFIG_JSON_ENV_VAR"
RECIPE = (
    "run the job with runtime_env={'worker_process_setup_hook': "
    f"'{SETUP_HOOK}', 'env_vars': {{'SGLANG_PLUGINS': ..., 'SGLANG_NVFP4_PATCHES_*': ...}}}} "
    "(ray job submit --runtime-env-json, or ray.init(runtime_env=...) before building the "
    "engine), with sglang-nvfp4-patches installed on every node"
)
logger = logging.getLogger("sglang_nvfp4_patches.llama4_router_weight")

_warned = threading.Event()


class RayJob(enum.Enum):
    """Which case applies to the Ray job this process belongs to (or will start)."""

    HOOKED = "the job's worker_process_setup_hook runs sglang.srt.plugins.load_plugins"
    NO_HOOK = "the job's runtime env has no worker_process_setup_hook"
    OTHER_HOOK = "the job's worker_process_setup_hook is not sglang.srt.plugins.load_plugins"
    NOT_WHITELISTED = f"the job's env_vars set SGLANG_PLUGINS without {PLUGIN_ENTRY_POINT}"
    NO_JOB = (
        "Ray is not running in this process and no `ray job submit` job config is set "
        "(SGLang will start Ray with an empty job runtime env)"
    )


def classify(runtime_env: Mapping[str, Any] | None) -> RayJob:
    """The case for a job whose runtime env is ``runtime_env`` (``None``: no Ray job yet)."""
    if runtime_env is None:
        return RayJob.NO_JOB
    hook = setup_hook(runtime_env)
    if not hook:
        return RayJob.NO_HOOK
    if hook not in (SETUP_HOOK, SETUP_HOOK_CALLABLE_NAME):
        return RayJob.OTHER_HOOK
    whitelist = (runtime_env.get("env_vars") or {}).get("SGLANG_PLUGINS")
    if whitelist and PLUGIN_ENTRY_POINT not in {n.strip() for n in whitelist.split(",")}:
        return RayJob.NOT_WHITELISTED
    return RayJob.HOOKED


def setup_hook(runtime_env: Mapping[str, Any]) -> object:
    """The job's setup hook: the runtime env's field, else the variable workers read it from."""
    hook = runtime_env.get("worker_process_setup_hook")
    return hook or (runtime_env.get("env_vars") or {}).get(SETUP_HOOK_ENV)


def runtime_env_from_job_config(job_config_json: str) -> dict[str, Any]:
    """The runtime env in the job config ``ray job submit`` passes its entrypoint."""
    try:
        config = json.loads(job_config_json)
    except json.JSONDecodeError as error:
        raise ValueError(f"{JOB_CONFIG_ENV} is not JSON: {error}") from error
    runtime_env = config.get("runtime_env") if isinstance(config, dict) else None
    return dict(runtime_env or {})


def warning_text(case: RayJob, hook: object = None) -> str:
    detail = case.value if case is not RayJob.OTHER_HOOK else f"{case.value} (it is {hook!r})"
    return (
        f"[{NAME}] --use-ray: {detail}, so SGLang {sglang_version()}'s Ray scheduler "
        "actors (sglang.srt.ray.scheduler_actor.SchedulerActor), which do not load plugins "
        "themselves, build the model without this plugin: a Llama 4 NVFP4 model on the "
        f"FlashInfer CUTLASS MoE runner is still rejected there at warm-up. To fix, {RECIPE}."
    )


def note_text(case: RayJob) -> str:
    if case is RayJob.HOOKED:
        return f"--use-ray: applied in Ray scheduler actors ({case.value})"
    if case is RayJob.NO_JOB:
        return (
            "--use-ray: applied in Ray scheduler actors only when the Ray job's "
            f"worker_process_setup_hook is {SETUP_HOOK} (no Ray job in this process; the "
            "driver warns when the hook is missing)"
        )
    return f"--use-ray: not applied in Ray scheduler actors ({case.value}; the driver warns)"


def actors_skip_plugins() -> bool:
    """Whether this SGLang's Ray scheduler actors skip plugins (read from the source file:
    importing it needs Ray)."""
    import sglang

    for root in sglang.__path__:
        actor = Path(root) / ACTOR_FILE
        if actor.is_file():
            return "load_plugins" not in actor.read_text(encoding="utf-8")
    return False


def job_runtime_env() -> dict[str, Any] | None:
    """The runtime env of this process's Ray job, if known: the running Ray's, else the one
    ``ray job submit`` put in the environment. Never imports Ray."""
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        return dict(ray.get_runtime_context().runtime_env)
    job_config = os.environ.get(JOB_CONFIG_ENV)
    if job_config:
        return runtime_env_from_job_config(job_config)
    return None


def check_ray_job() -> RayJob:
    """Classify this process's Ray job; one WARNING per process when the actors miss the plugin."""
    runtime_env = job_runtime_env()
    case = classify(runtime_env)
    if case is not RayJob.HOOKED and not _warned.is_set():
        _warned.set()
        logger.warning(warning_text(case, setup_hook(runtime_env or {})))
    return case


def _on_ray_engine(_module: Any) -> None:
    check_ray_job()


def install() -> None:
    """Check the Ray job when SGLang imports its Ray engine, where the actors skip plugins."""
    from sglang_nvfp4_patches.post_import import when_imported

    if actors_skip_plugins():
        when_imported(RAY_ENGINE_MODULE, _on_ray_engine)


def doctor_note() -> str | None:
    """Which Ray case applies to this process (``None`` where SGLang's actors load plugins)."""
    if not actors_skip_plugins():
        return None
    try:
        return note_text(classify(job_runtime_env()))
    except ValueError as error:
        return f"--use-ray: cannot read this Ray job's runtime env ({error})"
