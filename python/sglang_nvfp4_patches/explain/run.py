"""Run ``explain``: the user's server flags read by SGLang's own parser, then SGLang's own
resolution per model x GPU on the CPU simulation, unpatched and patched."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import sys
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sglang_nvfp4_patches.errors import EXIT_FAILED, EXIT_OK, LaunchRefused, UsageError
from sglang_nvfp4_patches.explain.input import (
    CONFIG_NAME,
    architecture,
    config_problem,
    failure_text,
    read_checkpoint,
    sglang_line,
)
from sglang_nvfp4_patches.explain.layer import LayerOutcome, across, layer_outcome
from sglang_nvfp4_patches.explain.table import ExplainRow, format_table
from sglang_nvfp4_patches.patch_report import PatchReport, PatchState
from sglang_nvfp4_patches.patches import PATCHES
from sglang_nvfp4_patches.progress import tracked
from sglang_nvfp4_patches.simulation.bundled import BUNDLED_MODELS, EXAMPLES_DIR
from sglang_nvfp4_patches.simulation.gpus import GPU_PROFILES, GpuProfile
from sglang_nvfp4_patches.simulation.moe_models import moe_count_reading, moe_model
from sglang_nvfp4_patches.simulation.server_args import (
    ResolvedBackends,
    ServerArgsRejected,
    resolve,
    sglang_parser,
)
from sglang_nvfp4_patches.supported_releases import sglang_version
from sglang_nvfp4_patches.this_process import decision, not_loaded_reason, read_back
from sglang_nvfp4_patches.this_process import reports as plugin_reports


@contextlib.contextmanager
def patches_suspended() -> Iterator[None]:
    """SGLang's own answer in a process where the patches are live."""
    with contextlib.ExitStack() as stack:
        for patch in PATCHES:
            stack.enter_context(patch.suspended())
        yield


Answers = tuple[ResolvedBackends, ResolvedBackends | None, str | None, LayerOutcome | None]


def explain_one(
    model: str,
    model_dir: Path,
    gpu: GpuProfile,
    with_patches: bool,
    flags: Mapping[str, Any] | None = None,
    disabled: Mapping[str, PatchReport] | None = None,
    patches_asked: bool = True,
    words: Sequence[str] = (),
) -> ExplainRow:
    """One row; ``flags`` are ``ServerArgs`` fields as the user's command line sets them
    (``words``: that command line's server flags, to name those at fault)."""
    flags = dict(flags or {})
    files = read_checkpoint(model_dir)
    config = files[model_dir / CONFIG_NAME]
    arch = architecture(config)
    concerned = [patch for patch in PATCHES if patch.concerns(arch)]

    def answers(given: Mapping[str, Any]) -> Answers:
        with patches_suspended():
            unpatched = resolve(model_dir, gpu, **given)
        patched, refused = _patched(model_dir, gpu, given) if with_patches else (None, None)
        built = with_patches and refused is None  # a refused launch builds no layer
        layer = layer_outcome(model_dir, gpu, given, patches_suspended, built)
        return unpatched, patched, refused, layer

    where = f"{model_dir} on simulated {gpu.name}"
    reading = SglangReading(files, flags, words, where)
    unpatched, patched, refused, layer = reading.answer(answers)
    if layer is not None:
        layer = across(layer, unpatched.layout)
    off = {PatchState.DISABLED: "off"}
    notes = tuple(
        (name, f"{name} is {off.get(report.state, report.state.value)} ({report.reason})")
        for name, report in (disabled or {}).items()
        if name in {patch.name for patch in concerned}
    )
    is_moe = moe_model(config) is not None
    return ExplainRow(
        model,
        gpu,
        unpatched,
        patched,
        arch,
        "attention_backend" in flags,
        notes,
        layer,
        patches_asked,
        unpatched.checkpoint_quantization if is_moe else None,
        refused,
        moe_count_reading(config),
        dense=not is_moe,
    )


def _patched(
    model_dir: Path, gpu: GpuProfile, flags: Mapping[str, Any]
) -> tuple[ResolvedBackends | None, str | None]:
    """The resolution with this process's hooks, or a patch's refusal of the
    launch (SGLang's own refusals stay errors)."""
    try:
        return resolve(model_dir, gpu, **flags), None
    except ServerArgsRejected as error:
        if isinstance(error.__cause__, LaunchRefused):
            return None, str(error.__cause__)
        raise


@dataclass(frozen=True)
class SglangReading:
    """SGLang reading a checkpoint's ``files`` with the user's server ``flags`` (``words``: as
    given): what it raises is one ``error:`` line naming the flags at fault, where SGLang takes
    the checkpoint without them, else the file and field; a failure in this plugin's own code
    is a bug and keeps its traceback."""

    files: Mapping[Path, Mapping[str, Any]]
    flags: Mapping[str, Any]
    words: Sequence[str]
    where: str  # the checkpoint and the simulated GPU

    def answer(self, answers: Callable[[Mapping[str, Any]], Answers]) -> Answers:
        try:
            return answers(self.flags)
        except KeyboardInterrupt:
            raise
        except Exception as error:
            frames = traceback.extract_tb(error.__traceback__)
            if not isinstance(error, ServerArgsRejected) and (
                isinstance(error, UsageError)
                or not frames
                or "sglang_nvfp4_patches" in frames[-1].filename
            ):
                raise
            at_fault = self._at_fault(answers)
            if at_fault:
                raise UsageError(self._flag_problem(at_fault, error, frames)) from error
            if isinstance(error, ServerArgsRejected):
                raise
            raise UsageError(config_problem(self.files, error, frames, sglang_version())) from error

    def _at_fault(self, answers: Callable[[Mapping[str, Any]], object]) -> list[str]:
        """The flags SGLang fails on: none where it fails without any (the checkpoint's fault);
        else each without which it passes, or all of them."""
        if not self.flags or not _passes(answers, {}):
            return []
        alone = [
            name
            for name in self.flags
            if _passes(answers, {key: v for key, v in self.flags.items() if key != name})
        ]
        return alone or list(self.flags)

    def _flag_problem(
        self, at_fault: Sequence[str], error: Exception, frames: Sequence[traceback.FrameSummary]
    ) -> str:
        given = spelled(self.words, at_fault)
        them = "it" if len(at_fault) == 1 else "them"
        if isinstance(error, ServerArgsRejected):
            failure = str(error).rstrip(".")
        else:
            failure = (
                f"SGLang {sglang_version()} fails with {them} for {self.where}: "
                f"{failure_text(error)} at {sglang_line(frames[-1])}"
            )
        return (
            f"{given}: {failure}; SGLang takes this checkpoint without {them}: change or "
            f"drop {them}"
        )


def _passes(answers: Callable[[Mapping[str, Any]], object], flags: Mapping[str, Any]) -> bool:
    try:
        answers(flags)
    except KeyboardInterrupt:
        raise
    except Exception:
        return False
    return True


def server_flags(words: Sequence[str]) -> dict[str, Any]:
    """The ``ServerArgs`` fields the user's server flags set, read by SGLang's own parser and
    flag-to-field mapping, so every flag of that release works as it does there."""
    from sglang.srt import server_args

    reader = getattr(server_args, "record_fields", dataclasses.fields)
    fields = [field.name for field in reader(server_args.ServerArgs)]
    # from_cli_args builds ``cls(**fields)``; a plain record takes them without resolving.
    record = dataclasses.make_dataclass(
        "ParsedServerArgs", [(name, Any, dataclasses.field(default=None)) for name in fields]
    )
    parser = sglang_parser()

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


def spelled(words: Sequence[str], fields: Sequence[str]) -> str:
    """The server flags among ``words`` that set ``fields`` (``--tp-size 0``), as SGLang's
    parser maps flags to fields; a field no word is found for, by its flag's usual name."""
    dests = {
        option: action.dest
        for action in sglang_parser()._actions
        for option in action.option_strings
    }
    picked: list[str] = []
    found: set[str] = set()
    taking = False
    for word in words:
        option = word.split("=", 1)[0]
        if option in dests or word.startswith("--"):
            taking = dests.get(option) in fields
            found.update([dests[option]] if taking else [])
        if taking:
            picked.append(word)
    missing = [f"--{field.replace('_', '-')}" for field in fields if field not in found]
    return " ".join(picked + missing)


# A patch acting in this process: applied, or applied as SGLang imports the code it concerns.
LIVE = (PatchState.APPLIED, PatchState.PENDING)


def patch_outcome(reports: Mapping[str, PatchReport]) -> tuple[bool, list[str]]:
    """Whether any patch is live in this process, and the stderr lines saying what is not."""
    failed = [report for report in reports.values() if report.state is PatchState.FAILED]
    if any(report.state in LIVE for report in reports.values()):
        return True, [f"error: {report.name} failed: {report.reason}" for report in failed]
    why = "; ".join(f"{r.name} {r.state.value}: {r.reason}" for r in reports.values())
    label = "error" if failed else "note"
    return False, [
        f"{label}: no patch is applied ({why or not_loaded_reason()}); showing SGLang's own answer"
    ]


def _plugin_reports() -> dict[str, PatchReport]:
    from sglang.srt.plugins import load_plugins

    load_plugins()  # The plugin is loaded the way SGLang loads it, or not at all.
    reports = plugin_reports()
    if reports and not decision().gate.applies:  # untested, no opt-in: the probes, read-only
        for patch in PATCHES:
            if reports[patch.name].state in (PatchState.NOT_PATCHED, PatchState.PENDING):
                reports[patch.name] = read_back(patch)
    return reports


def run_explain(args: argparse.Namespace) -> int:
    """Exit 0, or 1 when a patch failed (as ``doctor``); bad input raises ``UsageError``."""
    reports = {} if args.no_patches else _plugin_reports()
    words = getattr(args, "server_flags", ())
    flags = server_flags(words)
    with_patches, problems = (False, []) if args.no_patches else patch_outcome(reports)
    # Patches that do not act here: their notes say so instead of what they would do.
    inactive = (PatchState.DISABLED, PatchState.NOT_PATCHED, PatchState.UNKNOWN)
    disabled = {n: r for n, r in reports.items() if r.state in inactive}
    if args.model is not None:
        models = [(str(args.model), args.model)]
    else:
        models = [(name, EXAMPLES_DIR / directory) for directory, name in BUNDLED_MODELS.items()]
    gpus = [GPU_PROFILES[args.gpu]] if args.gpu else list(GPU_PROFILES.values())
    cells = [(name, path, gpu) for name, path in models for gpu in gpus]
    rows = [
        explain_one(name, path, gpu, with_patches, flags, disabled, not args.no_patches, words)
        for name, path, gpu in tracked(cells, len(cells), "row")
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
