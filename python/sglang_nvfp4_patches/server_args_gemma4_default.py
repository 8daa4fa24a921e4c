"""Patch ``gemma4-attention``: SGLang's server-args defaulting of the Gemma 4 attention backend.

The decision is :func:`gemma4_attention_rule.decide_gemma4_attention`; this module only wires
it into the installed SGLang, through whichever of three layouts the release has (probed, in
this order):

* ``model-override registry`` (0.5.20+): providers registered with
  ``sglang.srt.arg_groups.model_override_base.register_model_override`` run in registration
  order and the last declaration of a field wins, so our provider, registered after SGLang's
  own Gemma 4 provider, re-declares ``attention_backend`` for the one affected combination.
* ``overrides module`` (0.5.15.post1-0.5.18): the same registry, held in
  ``sglang.srt.arg_groups.overrides``; providers read the ServerArgs record directly.
* ``ServerArgs method`` (0.5.13-0.5.14): ``ServerArgs._handle_model_specific_adjustments``
  sets the default in place; an AROUND hook (SGLang's ``HookRegistry``) sets
  ``attention_backend`` first, exactly as if the user had passed ``--attention-backend triton``.
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib
import inspect
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from sglang_nvfp4_patches.gemma4_attention_rule import (
    AFFECTED_BACKEND,
    GEMMA4_ARCHITECTURES,
    SAFE_BACKEND,
    SM10X_MAJOR,
    Gemma4Action,
    Gemma4Decision,
    Gemma4Facts,
    decide_gemma4_attention,
    is_nvfp4_moe_on_sm10x,
    override_hint,
)
from sglang_nvfp4_patches.status import (
    PATCHED_MARK,
    PatchReport,
    PatchState,
    PatchUnavailable,
    outside_supported_range,
    sglang_version,
)

PATCH_NAME = "gemma4-attention"
logger = logging.getLogger("sglang_nvfp4_patches.gemma4_attention")

SERVER_ARGS_MODULE = "sglang.srt.server_args"
OVERRIDES_MODULE = "sglang.srt.arg_groups.overrides"
ADJUSTMENTS_METHOD = "_handle_model_specific_adjustments"
# The guard SGLang 0.5.13 shipped: its own Gemma 4 default reads this field.
_UPSTREAM_GUARD_FIELD = "enable_moe_block"

# Lets ``explain`` compute SGLang's unpatched answer in a process where the patch is live.
_suspended: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "gemma4_attention_suspended", default=False
)


@contextlib.contextmanager
def suspended() -> Iterator[None]:
    """Inside this block the installed patch declares nothing (SGLang's own answer)."""
    token = _suspended.set(True)
    try:
        yield
    finally:
        _suspended.reset(token)


def _text_config(hf_config: Any) -> Any:
    text_config = getattr(hf_config, "text_config", None)
    return hf_config if text_config is None else text_config


def _architecture(hf_config: Any) -> str | None:
    architectures = getattr(hf_config, "architectures", None) or [None]
    return architectures[0]


def _major(is_sm100: bool) -> int | None:
    """SM10X exactly as SGLang sees it when it picks trtllm_mha (its ``is_sm100`` probe)."""
    return SM10X_MAJOR if is_sm100 else None


def log_decision(decision: Gemma4Decision, model_path: str) -> None:
    """One INFO line when we pick triton, one WARNING when trtllm_mha is forced by the user."""
    if decision.action is Gemma4Action.USE_TRITON:
        logger.info("[%s] %s: %s; %s.", PATCH_NAME, model_path, decision.reason, override_hint())
    if decision.warn_explicit_trtllm:
        logger.warning(
            "[%s] %s: %s is honoured as given, but Gemma 4 NVFP4 (modelopt_fp4) MoE on SM10X "
            "has a known accuracy problem with it (MMLU 0.622 -> 0.037 in one report, "
            "-2.09 pp in sglang#26518). Omit the flag to get %s, or verify with "
            "`python -m sglang_nvfp4_patches accuracy`.",
            PATCH_NAME,
            model_path,
            AFFECTED_BACKEND,
            SAFE_BACKEND,
        )


def _decide(facts: Gemma4Facts, model_path: str) -> Gemma4Decision:
    decision = decide_gemma4_attention(facts)
    log_decision(decision, model_path)
    return decision


def _mentions_upstream_guard(functions: list[Callable[..., Any]]) -> bool:
    """Whether SGLang's own Gemma 4 default already looks at ``enable_moe_block``."""
    for function in functions:
        try:
            if _UPSTREAM_GUARD_FIELD in inspect.getsource(function):
                return True
        except (OSError, TypeError):
            continue
    return False


# ----------------------------------------------------------------------------- layouts

# Records resolved by our 0.5.13-0.5.18 hooks. Those releases resolve ServerArgs when it is
# constructed, so a record built before SGLang loaded plugins (``Engine(server_args=...)``)
# never passed through them; ``warn_if_resolved_before_plugins`` looks for it here.
_seen_records: dict[int, Any] = {}


@dataclass(frozen=True)
class _RegistryLayout:
    """A model-override registry: ``register_model_override`` + ``_MODEL_OVERRIDE_FNS``."""

    name: str
    module: Any
    provider: Callable[[Any, Any], dict[str, Any]]
    resolves_on_construction: bool  # ServerArgs.__post_init__ resolves (before 0.5.20)

    def registered(self) -> dict[str, list[Callable[..., Any]]]:
        return self.module._MODEL_OVERRIDE_FNS

    def upstream_providers(self) -> list[Callable[..., Any]]:
        return [
            fn
            for arch in GEMMA4_ARCHITECTURES
            for fn in self.registered().get(arch, ())
            if not getattr(fn, PATCHED_MARK, False)
        ]

    def installed(self) -> bool:
        return all(self.provider in self.registered().get(a, ()) for a in GEMMA4_ARCHITECTURES)

    def install(self) -> None:
        for architecture in sorted(GEMMA4_ARCHITECTURES):
            if self.provider not in self.registered().get(architecture, ()):
                self.module.register_model_override(architecture)(self.provider)

    def where(self) -> str:
        last = all(self.registered()[a][-1] is self.provider for a in GEMMA4_ARCHITECTURES)
        order = "last" if last else "registered (another provider follows it)"
        return f"{self.name}: provider {order} for Gemma 4"


def registry_provider(server_args: Any, hf_config: Any) -> dict[str, Any]:
    """0.5.20+ provider: reads the live resolving view, never writes ``server_args``."""
    if _suspended.get():
        return {}
    from sglang.srt.arg_groups.model_override_base import model_config_of, resolving_view
    from sglang.srt.runtime_context import get_platform

    cfg = resolving_view(server_args)
    facts = Gemma4Facts(
        architecture=_architecture(hf_config),
        quantization=model_config_of(server_args).quantization,
        enable_moe_block=getattr(_text_config(hf_config), "enable_moe_block", None),
        compute_capability_major=_major(get_platform().is_sm100),
        attention_backend=cfg.attention_backend,
        prefill_attention_backend=cfg.prefill_attention_backend,
        decode_attention_backend=cfg.decode_attention_backend,
    )
    decision = _decide(facts, cfg.model_path)
    return {} if decision.attention_backend is None else {"attention_backend": SAFE_BACKEND}


def _record_facts(server_args: Any, probe_module: str) -> Gemma4Facts:
    """Facts read straight off a ServerArgs record (0.5.13-0.5.18), with SGLang's SM10X probe
    as bound in ``probe_module``, the binding that release's Gemma 4 default reads."""
    model_config = server_args.get_model_config()
    text_config = _text_config(model_config.hf_config)
    return Gemma4Facts(
        architecture=_architecture(model_config.hf_config),
        quantization=model_config.quantization,
        enable_moe_block=getattr(text_config, "enable_moe_block", None),
        compute_capability_major=_major(importlib.import_module(probe_module).is_sm100_supported()),
        attention_backend=server_args.attention_backend,
        prefill_attention_backend=server_args.prefill_attention_backend,
        decode_attention_backend=server_args.decode_attention_backend,
    )


def overrides_module_provider(server_args: Any, hf_config: Any) -> dict[str, Any]:
    """0.5.15.post1-0.5.18 provider: those releases hand providers the pristine record."""
    _seen_records[id(server_args)] = server_args
    if _suspended.get():
        return {}
    facts = _record_facts(server_args, OVERRIDES_MODULE)
    decision = _decide(facts, server_args.model_path)
    return {} if decision.attention_backend is None else {"attention_backend": SAFE_BACKEND}


def adjustments_hook(original: Callable[..., Any], server_args: Any, *args: Any, **kw: Any) -> Any:
    """0.5.13-0.5.14: default ``attention_backend`` before SGLang's in-place Gemma 4 branch."""
    _seen_records[id(server_args)] = server_args
    if not _suspended.get():
        facts = _record_facts(server_args, SERVER_ARGS_MODULE)
        if _decide(facts, server_args.model_path).attention_backend is not None:
            server_args.attention_backend = SAFE_BACKEND
    return original(server_args, *args, **kw)


for _fn in (registry_provider, overrides_module_provider, adjustments_hook):
    setattr(_fn, PATCHED_MARK, True)


@dataclass(frozen=True)
class _MethodLayout:
    """``ServerArgs._handle_model_specific_adjustments`` sets the Gemma 4 default in place."""

    server_args_cls: type

    name = "ServerArgs._handle_model_specific_adjustments hook"
    resolves_on_construction = True

    def method(self) -> Callable[..., Any]:
        return self.server_args_cls.__dict__[ADJUSTMENTS_METHOD]

    def upstream_providers(self) -> list[Callable[..., Any]]:
        return [inspect.unwrap(self.method())]

    def installed(self) -> bool:
        wrapped = self.method()
        return getattr(wrapped, "__wrapped__", None) is not None and any(
            getattr(cell.cell_contents, PATCHED_MARK, False)
            for cell in (wrapped.__closure__ or ())
            if callable(getattr(cell, "cell_contents", None))
        )

    def install(self) -> None:
        from sglang.srt.plugins.hook_registry import HookRegistry, HookType

        target = f"{SERVER_ARGS_MODULE}.ServerArgs.{ADJUSTMENTS_METHOD}"
        HookRegistry.register(target, adjustments_hook, HookType.AROUND)
        HookRegistry.apply_hooks()

    def where(self) -> str:
        return f"{self.name} installed"


def _layout() -> Any:
    """Probe the installed SGLang for the layout that holds the Gemma 4 default."""
    try:
        base = importlib.import_module("sglang.srt.arg_groups.model_override_base")
    except ImportError:
        base = None
    if base is not None:  # 0.5.20+: the registry must be complete, no fallback
        for name in ("register_model_override", "_MODEL_OVERRIDE_FNS"):
            if not hasattr(base, name):
                raise PatchUnavailable(f"{base.__name__} has no {name}")
        importlib.import_module("sglang.srt.arg_groups.model_overrides")  # SGLang's first
        return _RegistryLayout("model-override registry", base, registry_provider, False)
    try:
        overrides = importlib.import_module(OVERRIDES_MODULE)
    except ImportError:
        overrides = None
    if overrides is not None and hasattr(overrides, "_MODEL_OVERRIDE_FNS"):
        for name in ("register_model_override", "is_sm100_supported"):
            if not hasattr(overrides, name):
                raise PatchUnavailable(f"{OVERRIDES_MODULE} has no {name}")
        return _RegistryLayout(
            "arg_groups.overrides registry", overrides, overrides_module_provider, True
        )
    server_args_module = importlib.import_module(SERVER_ARGS_MODULE)
    server_args_cls = getattr(server_args_module, "ServerArgs", None)
    if server_args_cls is not None and ADJUSTMENTS_METHOD in vars(server_args_cls):
        if not hasattr(server_args_module, "is_sm100_supported"):
            raise PatchUnavailable(f"{SERVER_ARGS_MODULE} has no is_sm100_supported")
        return _MethodLayout(server_args_cls)
    raise PatchUnavailable(
        "found neither a model-override registry (sglang.srt.arg_groups.model_override_base "
        "or .overrides) nor ServerArgs._handle_model_specific_adjustments"
    )


def _already_upstream() -> PatchReport:
    return PatchReport(
        PATCH_NAME,
        PatchState.ALREADY_UPSTREAM,
        "SGLang's own Gemma 4 default already checks enable_moe_block (NVFP4 MoE -> triton)",
    )


def install() -> PatchReport:
    """Hook the Gemma 4 default on the layout this SGLang has (idempotent)."""
    layout = _layout()
    if not layout.installed():
        if _mentions_upstream_guard(layout.upstream_providers()):
            return _already_upstream()
        layout.install()
        if layout.resolves_on_construction:
            from sglang_nvfp4_patches.post_import import when_imported

            when_imported(ENGINE_MODULE, _hook_engine_launch)
    return current_state()


def current_state() -> PatchReport:
    """What SGLang holds now (not what ``install`` believes it did)."""
    layout = _layout()
    if layout.installed():
        return PatchReport(
            PATCH_NAME,
            PatchState.APPLIED,
            f"{layout.where()}: NVFP4 MoE on SM10X defaults to {SAFE_BACKEND} unless an "
            "attention backend is given",
        )
    if _mentions_upstream_guard(layout.upstream_providers()):
        return _already_upstream()
    return PatchReport(PATCH_NAME, PatchState.FAILED, f"not installed in the {layout.name}")


def out_of_range_report() -> PatchReport:
    """Outside the supported range nothing is installed; say whether upstream has the fix."""
    try:
        if _mentions_upstream_guard(_layout().upstream_providers()):
            return _already_upstream()
    except PatchUnavailable:
        pass
    return outside_supported_range(PATCH_NAME)


ENGINE_MODULE = "sglang.srt.entrypoints.engine"


def warn_if_resolved_before_plugins(server_args: Any) -> bool:
    """Warn when a record our hooks never saw runs the affected combination on trtllm_mha."""
    if _seen_records.get(id(server_args)) is server_args:
        return False
    facts = _record_facts(server_args, SERVER_ARGS_MODULE)
    backends = (
        facts.attention_backend,
        facts.prefill_attention_backend,
        facts.decode_attention_backend,
    )
    if not (is_nvfp4_moe_on_sm10x(facts) and AFFECTED_BACKEND in backends):
        return False
    logger.warning(
        "[%s] %s: this ServerArgs was resolved before SGLang loaded plugins (Engine("
        "server_args=...) on SGLang %s), so it runs with %s, which has a known accuracy "
        "problem for Gemma 4 NVFP4 MoE on SM10X. Call sglang.srt.plugins.load_plugins() before "
        "building ServerArgs, pass the arguments to sglang.Engine(...) directly, or set "
        "attention_backend='%s' yourself.",
        PATCH_NAME,
        server_args.model_path,
        sglang_version(),
        AFFECTED_BACKEND,
        SAFE_BACKEND,
    )
    return True


def _engine_launch_hook(original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    server_args = kwargs.get("server_args", args[1] if len(args) > 1 else None)
    if server_args is not None:
        try:
            warn_if_resolved_before_plugins(server_args)
        except Exception as error:  # a diagnostic must never stop the engine
            logger.debug("[%s] prebuilt ServerArgs check skipped: %s", PATCH_NAME, error)
    return original(*args, **kwargs)


def _hook_engine_launch(module: Any) -> None:
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    if hasattr(getattr(module, "Engine", None), "_launch_subprocesses"):
        HookRegistry.register(
            f"{ENGINE_MODULE}.Engine._launch_subprocesses", _engine_launch_hook, HookType.AROUND
        )
        HookRegistry.apply_hooks()
