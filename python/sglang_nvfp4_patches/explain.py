"""``explain``: what SGLang picks for a checkpoint on a GPU, unpatched vs patched (CPU only)."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import sys
import traceback
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from sglang_nvfp4_patches import plugin, server_args_gemma4_default
from sglang_nvfp4_patches.errors import EXIT_FAILED, EXIT_OK, UsageError
from sglang_nvfp4_patches.explain_input import architecture, config_problem, read_model_config
from sglang_nvfp4_patches.flashinfer_cutlass_runner import PATCH_NAME as ROUTER_PATCH
from sglang_nvfp4_patches.gemma4_attention_rule import GEMMA4_ARCHITECTURES
from sglang_nvfp4_patches.gpu_profiles import GPU_PROFILES, GpuProfile
from sglang_nvfp4_patches.moe_layer_probe import compressed_tensors_moe_runner
from sglang_nvfp4_patches.sglang_resolution import ResolvedBackends, resolve
from sglang_nvfp4_patches.status import PatchReport, PatchState, sglang_version

EXAMPLES_DIR = Path(__file__).parent / "example_configs"
# Bundled stand-in configs and the checkpoint each represents.
BUNDLED_MODELS: dict[str, str] = {
    "gemma-4-26b-a4b-nvfp4": "nvidia/Gemma-4-26B-A4B-NVFP4",
    "gemma-4-26b-a4b-it": "google/gemma-4-26B-A4B-it",
    "gemma-4-31b-it-nvfp4": "nvidia/Gemma-4-31B-IT-NVFP4",
    "llama-4-scout-17b-16e-nvfp4": "nvidia/Llama-4-Scout-17B-16E-Instruct-FP4",
    "llama-4-scout-17b-16e-nvfp4-compressed-tensors": (
        "RedHatAI/Llama-4-Scout-17B-16E-Instruct-NVFP4"
    ),
}
LLAMA4_ARCHITECTURES = frozenset({"Llama4ForConditionalGeneration", "Llama4ForCausalLM"})
# Which rows a switched-off patch concerns, for the note.
PATCH_ARCHITECTURES: dict[str, frozenset[str]] = {
    server_args_gemma4_default.PATCH_NAME: GEMMA4_ARCHITECTURES,
    ROUTER_PATCH: LLAMA4_ARCHITECTURES,
}


@dataclass(frozen=True)
class ExplainRow:
    model: str
    gpu: GpuProfile
    unpatched: ResolvedBackends
    patched: ResolvedBackends | None
    architecture: str | None
    attention_backend_given: bool = False
    # "name is off (reason)" for each disabled patch that concerns this architecture.
    disabled_notes: tuple[str, ...] = ()
    # What SGLang's compressed-tensors scheme builds for the MoE layer (resolution says auto).
    moe_layer_runner: str | None = None

    @property
    def final(self) -> ResolvedBackends:
        return self.patched if self.patched is not None else self.unpatched

    @property
    def decided_by(self) -> str:
        """The patch whose declaration changed SGLang's answer, ``user`` when the user's
        ``--attention-backend`` decided, else ``sglang``."""
        if self.patched is not None and self.patched != self.unpatched:
            return server_args_gemma4_default.PATCH_NAME
        return "user" if self.attention_backend_given else "sglang"

    @property
    def note(self) -> str:
        return "; ".join(note for note in (*self.disabled_notes, self._patch_note) if note)

    @property
    def _patch_note(self) -> str:
        if self.architecture in GEMMA4_ARCHITECTURES:
            return server_args_gemma4_default.root_cause_note()
        if self.architecture in LLAMA4_ARCHITECTURES:
            runner = self.moe_layer_runner or self.final.moe_runner_backend
            if runner == "flashinfer_cutlass":
                return (
                    f"{ROUTER_PATCH}: the CUTLASS runner pre-scales the top-1 router weight "
                    "(apply_router_weight_on_input)"
                )
            return f"{ROUTER_PATCH} acts only on the flashinfer_cutlass MoE runner"
        return ""

    def as_json(self) -> dict[str, object]:
        return {
            "model": self.model,
            "gpu": self.gpu.name,
            "attention_backend": self.final.attention_backend,
            "moe_runner_backend": self.final.moe_runner_backend,
            "decided_by": self.decided_by,
            "unpatched_attention_backend": self.unpatched.attention_backend,
            "unpatched_moe_runner_backend": self.unpatched.moe_runner_backend,
            "patched": self.patched is not None,
            "moe_layer_runner": self.moe_layer_runner,
            "note": self.note,
        }


def explain_one(
    model: str,
    model_dir: Path,
    gpu: GpuProfile,
    with_patches: bool,
    flags: Mapping[str, Any] | None = None,
    disabled: Mapping[str, PatchReport] | None = None,
) -> ExplainRow:
    """One row; ``flags`` are ``ServerArgs`` fields as the user's command line sets them."""
    flags = dict(flags or {})
    config = read_model_config(model_dir)
    arch = architecture(config)
    with sglang_reading(model_dir, config):
        with server_args_gemma4_default.suspended():
            unpatched = resolve(model_dir, gpu, **flags)
        patched = resolve(model_dir, gpu, **flags) if with_patches else None
        layer_runner = compressed_tensors_moe_runner(model_dir, gpu, **flags)
    notes = tuple(
        f"{name} is off ({report.reason})"
        for name, report in (disabled or {}).items()
        if arch in PATCH_ARCHITECTURES.get(name, frozenset())
    )
    return ExplainRow(
        model, gpu, unpatched, patched, arch, "attention_backend" in flags, notes, layer_runner
    )


@contextlib.contextmanager
def sglang_reading(model_dir: Path, config: Mapping[str, Any]) -> Iterator[None]:
    """Whatever SGLang (or transformers under it) raises while reading ``config.json`` becomes
    one ``error:`` line naming the field and the line of SGLang that reads it.

    Refusals SGLang words itself (ValueError, assert) are already UsageErrors; a failure
    inside this plugin's own code is a bug and keeps its traceback.
    """
    try:
        yield
    except (UsageError, KeyboardInterrupt):
        raise
    except Exception as error:
        frames = traceback.extract_tb(error.__traceback__)
        if not frames or "sglang_nvfp4_patches" in frames[-1].filename:
            raise
        raise UsageError(
            config_problem(model_dir / "config.json", config, error, frames, sglang_version())
        ) from error


class _OneLineParser(argparse.ArgumentParser):
    """SGLang's own server parser; its complaint becomes one ``error:`` line, not an exit."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"sglang serve (SGLang {sglang_version()}): {message}")


def server_flags(words: Sequence[str]) -> dict[str, Any]:
    """The ``ServerArgs`` fields the user's server flags set, read by the installed SGLang's
    own parser (``ServerArgs.add_cli_args``) and its own flag-to-field mapping
    (``ServerArgs.from_cli_args``), so every flag of that release works as it does there."""
    from sglang.srt import server_args

    reader = getattr(server_args, "record_fields", dataclasses.fields)
    fields = [field.name for field in reader(server_args.ServerArgs)]
    # from_cli_args builds ``cls(**fields)``; a plain record takes them without resolving.
    record = dataclasses.make_dataclass(
        "ParsedServerArgs", [(name, Any, dataclasses.field(default=None)) for name in fields]
    )
    parser = _OneLineParser(prog="sglang serve", add_help=False)  # as launch_server parses
    server_args.ServerArgs.add_cli_args(parser)

    def parsed(extra: Sequence[str]) -> dict[str, Any]:
        with contextlib.redirect_stdout(sys.stderr):  # deprecation notes stay off stdout
            namespace = parser.parse_args(["--model-path", "explain", *extra])
        return vars(server_args.ServerArgs.from_cli_args.__func__(record, namespace))

    defaults, given = parsed([]), parsed(words)
    return {
        name: value
        for name, value in given.items()
        if name != "model_path" and value != defaults.get(name)
    }


def patch_outcome(reports: Mapping[str, PatchReport]) -> tuple[bool, list[str]]:
    """Whether any patch is live in this process, and the stderr lines saying what is not."""
    failed = [report for report in reports.values() if report.state is PatchState.FAILED]
    if any(report.state is PatchState.APPLIED for report in reports.values()):
        return True, [f"error: {report.name} failed: {report.reason}" for report in failed]
    why = "; ".join(f"{r.name} {r.state.value}: {r.reason}" for r in reports.values())
    label = "error" if failed else "note"
    return False, [
        f"{label}: no patch is applied ({why or 'SGLang did not load the plugin; see doctor'});"
        " showing SGLang's own answer"
    ]


def _format_pair(before: str | None, after: str | None, with_patches: bool) -> str:
    if not with_patches or before == after:
        return str(before)
    return f"{before} -> {after}"


def format_table(rows: list[ExplainRow], with_patches: bool) -> str:
    header = (
        "model",
        "GPU",
        "attention (unpatched -> patched)" if with_patches else "attention",
        "MoE runner (unpatched -> patched)" if with_patches else "MoE runner",
        "decided by",
    )
    lines = [header]
    for row in rows:
        final = row.final
        lines.append(
            (
                row.model,
                row.gpu.name,
                _format_pair(
                    row.unpatched.attention_backend, final.attention_backend, with_patches
                ),
                _format_pair(
                    row.unpatched.moe_runner_backend, final.moe_runner_backend, with_patches
                )
                + (f" (layer: {row.moe_layer_runner})" if row.moe_layer_runner else ""),
                row.decided_by,
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    text = [
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in lines
    ]
    text.insert(1, "  ".join("-" * width for width in widths))
    notes = sorted({row.note for row in rows if row.note})
    return "\n".join(text + [""] + [f"note: {note}" for note in notes]).rstrip() + "\n"


def _plugin_reports() -> dict[str, PatchReport]:
    from sglang.srt.plugins import load_plugins

    load_plugins()  # The plugin is loaded the way SGLang loads it, or not at all.
    return plugin.reports()


def run_explain(args: argparse.Namespace) -> int:
    """Exit 0, or 1 when a patch failed (as ``doctor``); bad input raises ``UsageError``."""
    reports = {} if args.no_patches else _plugin_reports()
    flags = server_flags(getattr(args, "server_flags", ()))
    with_patches, problems = (False, []) if args.no_patches else patch_outcome(reports)
    disabled = {n: r for n, r in reports.items() if r.state is PatchState.DISABLED}
    if args.model is not None:
        models = [(str(args.model), args.model)]
    else:
        models = [(name, EXAMPLES_DIR / directory) for directory, name in BUNDLED_MODELS.items()]
    gpus = [GPU_PROFILES[args.gpu]] if args.gpu else list(GPU_PROFILES.values())
    rows = [
        explain_one(name, path, gpu, with_patches, flags, disabled)
        for name, path in models
        for gpu in gpus
    ]
    for line in problems:  # after the rows: input SGLang refuses stays one error line
        print(line, file=sys.stderr)
    if args.json:
        for row in rows:
            print(json.dumps(row.as_json()))
    else:
        print(format_table(rows, with_patches), end="")
    failed = any(report.state is PatchState.FAILED for report in reports.values())
    return EXIT_FAILED if failed else EXIT_OK
