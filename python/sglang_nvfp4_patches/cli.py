"""``python -m sglang_nvfp4_patches {explain,doctor,verify,accuracy}``: the whole command line,
defined without importing torch or SGLang (a command's module is imported when it runs).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import functools
import importlib.util
import os
import re
import shlex
import sys
import tempfile
import traceback
import warnings
from collections.abc import Sequence
from pathlib import Path

from sglang_nvfp4_patches import __version__
from sglang_nvfp4_patches.accuracy.cli import (
    add_accuracy_parser,
    attach_command_line_values,
    path_argument,
)
from sglang_nvfp4_patches.errors import (
    EXIT_BROKEN_PIPE,
    EXIT_ENVIRONMENT,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    EnvironmentProblem,
    UsageError,
    environment_cause,
    storage_cause,
)
from sglang_nvfp4_patches.interrupts import (
    INTERRUPTED,
    caused_by_interrupt,
    stop_requested,
    stop_requests_as_interrupt,
)
from sglang_nvfp4_patches.progress import announce
from sglang_nvfp4_patches.settings import check_environment
from sglang_nvfp4_patches.simulation.gpus import gpu_choices, gpu_profile
from sglang_nvfp4_patches.streams import OutputUnwritable, discard, guarded
from sglang_nvfp4_patches.supported_releases import sglang_version


def _run_explain(args: argparse.Namespace) -> int:
    from sglang_nvfp4_patches.explain.input import read_model_config

    if args.model is not None:
        read_model_config(args.model)  # a Hub id or broken config fails before any import
    announce(f"importing SGLang {sglang_version()} ...")
    from sglang_nvfp4_patches.explain.run import run_explain

    return run_explain(args)


def _run_doctor(args: argparse.Namespace) -> int:
    announce(f"importing SGLang {sglang_version()} ...")
    from sglang_nvfp4_patches.doctor import run_doctor

    return run_doctor(args)


def _run_verify(args: argparse.Namespace) -> int:
    from sglang_nvfp4_patches.verify.run import run_verify

    return run_verify(args)


def _gpu(text: str) -> str:
    """argparse type: a GPU profile by its SM name or a GPU's name, as its profile name."""
    profile = gpu_profile(text)
    if profile is None:
        raise argparse.ArgumentTypeError(f"unknown GPU {text!r}; choose from {gpu_choices()}")
    return profile.name


CONSOLE_SCRIPT = "sglang-nvfp4-patches"


def build_parser() -> argparse.ArgumentParser:
    started_as = Path(sys.argv[0]).name  # the console script, or ``python -m``
    parser = argparse.ArgumentParser(
        prog=CONSOLE_SCRIPT if started_as == CONSOLE_SCRIPT else "python -m sglang_nvfp4_patches",
        description="SGLang plugin for NVFP4 on Blackwell: explain, doctor, verify, accuracy A/B.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True)
    explain = subparsers.add_parser(
        "explain",
        help="what SGLang picks for a checkpoint on a GPU, unpatched vs patched (CPU only)",
        description=(
            "Runs SGLang's own server-args resolution with the GPU simulated. Any other "
            "option is a server flag as you would give it to 'sglang serve' (e.g. "
            "--kv-cache-dtype fp8_e4m3 --tp-size 4 --moe-runner-backend flashinfer_cutlass): "
            "the installed SGLang's own parser reads it, so the answer is for that exact "
            "command line."
        ),
        allow_abbrev=False,  # an SGLang flag must never be taken for a prefix of ours
    )
    explain.add_argument(
        "--model",
        "--model-path",
        type=path_argument,
        help="local directory holding a config.json (as --model-path for sglang serve)",
    )
    explain.add_argument(
        "--gpu",
        type=_gpu,
        metavar="GPU",
        help=f"simulate one GPU only: {gpu_choices()} (case-insensitive)",
    )
    explain.add_argument("--no-patches", action="store_true", help="SGLang's own answer only")
    explain.add_argument("--json", action="store_true", help="one JSON object per model x GPU")
    explain.set_defaults(func=_run_explain)
    doctor = subparsers.add_parser(
        "doctor", help="what is patched here and what is already upstream"
    )
    doctor.add_argument("--json", action="store_true", help="machine-readable output")
    doctor.set_defaults(func=_run_doctor)
    verify = subparsers.add_parser(
        "verify",
        help="check each patch's contract against this SGLang on CPU (no GPU, no download)",
        description=(
            "Runs each patch's contract through the installed SGLang's real code on a "
            "simulated GPU, in fresh processes with every patch switched on (also on an "
            "untested release). One line per check; exit 0 only when every check holds."
        ),
    )
    verify.add_argument("--json", action="store_true", help="one JSON object per check")
    verify.set_defaults(func=_run_verify)
    add_accuracy_parser(subparsers)
    return parser


def _check_given_paths(args: argparse.Namespace) -> None:
    """A path given that the system refuses to look at is bad input naming it."""
    for name in ("model", "out", "out_dir", "run_a", "run_b", "data", "model_path"):
        path = getattr(args, name, None)
        try:
            os.stat(path or ".")
        except OSError as error:
            if error.errno in (errno.ENAMETOOLONG, errno.EACCES):
                raise UsageError(f"{path}: {error.strerror}; give a path you can use") from None


def _chosen_parser(
    parser: argparse.ArgumentParser, words: Sequence[str]
) -> argparse.ArgumentParser:
    """The parser of the (sub)command ``words`` choose; an option it does not know (nor SGLang,
    after ``explain``) is a usage error naming it, before any import or argparse's complaint."""
    for word in words:
        subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if subparsers and word in subparsers[0].choices:
            parser = subparsers[0].choices[word]
            continue
        name = word.split("=", 1)[0]
        known = [*parser._option_string_actions]
        if parser.prog.endswith(" explain"):  # none read: SGLang's own parser decides
            known += _sglang_flags() or [name]
        if name.startswith("--") and name != "--" and not any(o.startswith(name) for o in known):
            parser.error(f"unrecognized arguments: {name}")
    return parser


@functools.cache
def _sglang_flags() -> list[str]:
    """SGLang's server flags and its plugins', read from their sources as text (no import): a
    superset, as SGLang's own parser still reads every flag that passes."""
    from importlib.metadata import entry_points

    plugins = entry_points(group="sglang.srt.plugins")
    flags: set[str] = set()
    for top in {
        "sglang",
        *(ep.value.split(".")[0] for ep in plugins if ep.name != "nvfp4_patches"),
    }:
        spec = importlib.util.find_spec(top)
        for root in (spec.submodule_search_locations or []) if spec else []:
            srt = Path(root) / "srt"
            files = [srt / "server_args.py", *(srt / "arg_groups").rglob("*.py")]
            for path in files if top == "sglang" else Path(root).rglob("*.py"):
                with contextlib.suppress(OSError, UnicodeDecodeError):
                    text = path.read_text(encoding="utf-8")
                    flags.update(re.findall(r"--[A-Za-z][\w-]*", text))
                    fields = re.findall(r"^ +(\w+) *:", text, re.M)
                    flags.update("--" + name.replace("_", "-") for name in fields)
    flags.update({"--no-" + flag[2:] for flag in flags})  # argparse's boolean pairs
    return sorted(flags)


def _run(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    words = attach_command_line_values(sys.argv[1:] if argv is None else argv)
    chosen = _chosen_parser(parser, words)
    args, server_flags = parser.parse_known_args(words)
    if server_flags and args.command != "explain":
        chosen.error(f"unrecognized arguments: {' '.join(server_flags)}")
    if args.command == "explain":
        args.server_flags = server_flags  # read by SGLang's own parser once it is imported
    # Importing SGLang without its GPU warns per quantization backend: not our output.
    warnings.filterwarnings("ignore", category=UserWarning, module=r"sglang\.")
    try:
        _check_given_paths(args)
        if args.command != "accuracy":
            from sglang_nvfp4_patches.patches import PATCHES

            check_environment(PATCHES)
        return int(args.func(args))
    except UsageError as error:  # every command's bad input, accuracy's included
        print(f"error: {error.cli_message()}", file=sys.stderr)
        return EXIT_USAGE


def main(argv: Sequence[str] | None = None) -> int:
    """Every exit is one line at most (usage errors, Ctrl-C, closed pipes, the environment, a
    bug of ours: its traceback goes to a file); an unwritable stderr changes no exit status."""
    if sys.stdout is None:
        return _environment_error(
            "stdout is closed (started with >&-); this command prints its answer there: give it "
            "a stdout (a file, a pipe or /dev/null)"
        )
    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = guarded(sys.stdout, True), guarded(sys.stderr, False)
    try:
        return _main(argv)
    finally:
        sys.stdout, sys.stderr = streams


def _environment_error(problem: EnvironmentProblem | str) -> int:
    if isinstance(problem, OutputUnwritable) and sys.stdout is not None:
        discard(sys.stdout.fileno())  # what is still buffered for it goes nowhere
    print(f"error: {problem}", file=sys.stderr)
    return EXIT_ENVIRONMENT


def _main(argv: Sequence[str] | None) -> int:
    try:
        try:
            with stop_requests_as_interrupt():
                status = _run(argv)
                if status != EXIT_INTERRUPTED and stop_requested():
                    raise KeyboardInterrupt  # a stop some code caught is still a stop
                return status
        finally:
            sys.stdout.flush()  # a closed pipe fails here, not in the interpreter's exit
    except KeyboardInterrupt:
        print(INTERRUPTED, file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        discard(sys.stdout.fileno())  # nothing more can reach the reader
        return EXIT_BROKEN_PIPE
    except EnvironmentProblem as problem:
        return _environment_error(problem)
    except Exception as error:  # not a UsageError: a bug, never a verdict or bad input
        if caused_by_interrupt(error):  # Ctrl-C inside an extension module's import
            print(INTERRUPTED, file=sys.stderr)
            return EXIT_INTERRUPTED
        refused = storage_cause(error)
        if refused is not None:
            return _environment_error(
                f"{refused}; what was written before is kept: make room there (or write "
                "elsewhere) and rerun the same command"
            )
        cause = environment_cause(error)
        if cause is not None:
            return _environment_error(
                f"this Python environment cannot run the command: {cause}; fix that "
                "installation (what comes first on PYTHONPATH; a HOME and TMPDIR that "
                "can be written) and rerun"
            )
        words = sys.argv[1:] if argv is None else list(argv)
        return internal_error(error, words)


INTERNAL_ERROR_PREFIX = "sglang-nvfp4-patches-internal-error-"


def internal_error(error: Exception, argv: Sequence[str]) -> int:
    """One ``internal error:`` line on stderr; the traceback saved to a file (else printed)."""
    trace = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    summary = " ".join(f"{type(error).__name__}: {error}".split())[:300]
    try:
        with tempfile.NamedTemporaryFile(
            "w", prefix=INTERNAL_ERROR_PREFIX, suffix=".txt", delete=False, encoding="utf-8"
        ) as handle:
            handle.write(f"sglang-nvfp4-patches {__version__}, Python {sys.version.split()[0]}\n")
            handle.write(f"command line: {shlex.join(argv)}\n\n{trace}")
        saved: str | None = handle.name
    except OSError:
        saved = None
    where = f"its traceback is saved in {saved}" if saved else "its traceback follows"
    print(
        f"internal error: {summary}; this is a bug in sglang-nvfp4-patches {__version__}, not "
        f"a problem with your input; {where}: please report it with that traceback",
        file=sys.stderr,
    )
    if saved is None:
        print(trace, file=sys.stderr, end="")
    return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
