"""SGLang's own server-args resolution for a config directory on a simulated GPU: a real
``ServerArgs``, resolved by SGLang with the GPU facts replaced, never a copy of its rules."""

from __future__ import annotations

import argparse
import contextlib
import io
import traceback
from collections.abc import Iterator
from dataclasses import MISSING, dataclass, fields
from pathlib import Path
from typing import Any, NoReturn

from sglang_nvfp4_patches.errors import UsageError
from sglang_nvfp4_patches.moe_layout import ONE_GPU, Layout
from sglang_nvfp4_patches.server_args_seam.launch import Launch, sglang_logs_held_back
from sglang_nvfp4_patches.simulation.gpus import GpuProfile, simulated_gpu
from sglang_nvfp4_patches.supported_releases import sglang_version


@dataclass(frozen=True)
class ResolvedBackends:
    attention_backend: str | None
    prefill_attention_backend: str | None
    decode_attention_backend: str | None
    moe_runner_backend: str | None
    quantization: str | None
    # What SGLang detects from the checkpoint itself (config.json or hf_quant_config.json),
    # whatever --quantization says.
    checkpoint_quantization: str | None = None
    # Where the MoE layers run: the GPUs and the all-to-all backend
    layout: Layout = ONE_GPU


# The ServerArgs fields SGLang resolves: those without a default (the others are derived).
_FIELDS = [field.name for field in fields(ResolvedBackends) if field.default is MISSING]


class ServerArgsRejected(UsageError):
    """SGLang's own ``ServerArgs`` refuses the arguments (as ``launch_server`` would)."""


@contextlib.contextmanager
def quiet_sglang() -> Iterator[None]:
    """SGLang logs and prints a page per resolution; keep the output readable."""
    with sglang_logs_held_back(), contextlib.redirect_stdout(io.StringIO()):
        yield


def resolved_server_args(model_dir: Path, **flags: Any) -> Any:
    """A ``ServerArgs`` for ``model_dir`` resolved by SGLang (call inside :func:`simulated_gpu`);
    ``flags`` are further ``ServerArgs`` fields as a user gives them."""
    from sglang.srt.server_args import ServerArgs

    server_args = ServerArgs(  # without resolve_once: resolved here, in __post_init__
        model_path=str(model_dir), skip_tokenizer_init=True, device="cuda", **flags
    )
    if hasattr(server_args, "resolve_once"):
        server_args.resolve_once()
    return server_args


def resolve(model_dir: Path, profile: GpuProfile, **flags: Any) -> ResolvedBackends:
    """SGLang's resolved backends for ``model_dir`` on ``profile`` (flags as a user gives them)."""
    try:
        with quiet_sglang(), simulated_gpu(profile):
            server_args = resolved_server_args(model_dir, **flags)
            if hasattr(server_args, "resolved_dict"):
                resolved = server_args.resolved_dict()
            else:
                resolved = {field: getattr(server_args, field, None) for field in _FIELDS}
            # what SGLang's ModelConfig detects from the checkpoint itself
            checkpoint = Launch.resolved(server_args).model_config.quantization
            layout = Layout.of(server_args)
    # SGLang validates server arguments with ValueError and assert; either is its refusal.
    except (ValueError, AssertionError) as error:
        raise ServerArgsRejected(
            f"SGLang {sglang_version()} refuses these server arguments for {model_dir} on "
            f"simulated {profile.name}: {_reason(error)}"
        ) from error
    backends = {field: resolved.get(field) for field in _FIELDS}
    return ResolvedBackends(**backends, checkpoint_quantization=checkpoint, layout=layout)


def _reason(error: BaseException) -> str:
    """SGLang's message, or for a bare ``assert`` the line that failed."""
    if str(error):
        return str(error)
    frames = traceback.extract_tb(error.__traceback__)
    line = (frames[-1].line or "").strip() if frames else ""
    return f"{type(error).__name__} at `{line}`" if line else type(error).__name__


class _OneLineParser(argparse.ArgumentParser):
    """SGLang's own server parser; its complaint becomes one ``error:`` line, not an exit."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"sglang serve (SGLang {sglang_version()}): {message}")


def sglang_parser() -> argparse.ArgumentParser:
    """SGLang's own server parser, as ``launch_server`` parses (its complaint: one line)."""
    from sglang.srt.server_args import ServerArgs

    parser = _OneLineParser(prog="sglang serve", add_help=False)
    ServerArgs.add_cli_args(parser)
    return parser


def flag_choices(flag: str) -> tuple[str, ...]:
    """The values SGLang's own server parser offers for ``flag`` (``--moe-runner-backend``)."""
    action = next(a for a in sglang_parser()._actions if flag in a.option_strings)
    return tuple(str(choice) for choice in action.choices or ())
