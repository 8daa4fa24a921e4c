"""Command line for ``accuracy run``, ``accuracy ab`` and ``accuracy compare``.

Exit 2: bad input; 1: only a significantly worse B; 3: unanswered questions or a server that
did not come up; 130: Ctrl-C (:mod:`sglang_nvfp4_patches.errors` names the codes).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from sglang_nvfp4_patches.accuracy.errors import ServerError
from sglang_nvfp4_patches.accuracy.limits import MAX_SECONDS
from sglang_nvfp4_patches.errors import (
    EXIT_INTERRUPTED,
    EXIT_SERVER,
    UsageError,
)
from sglang_nvfp4_patches.streams import printable

if TYPE_CHECKING:
    from sglang_nvfp4_patches.accuracy.run import RunConfig


def _number(
    kind: type, minimum: float, inclusive: bool, maximum: float = math.inf
) -> Callable[[str], float]:
    """argparse type: a finite ``kind`` within [minimum, maximum] (or above ``minimum``)."""

    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            expected = "an integer" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
        low = value >= minimum if inclusive else value > minimum
        if not (math.isfinite(value) and low and value <= maximum):
            bound = f">= {minimum:g}" if inclusive else f"> {minimum:g}"
            if maximum < math.inf:
                bound += f" and <= {maximum:g}"
            raise argparse.ArgumentTypeError(f"must be a finite number {bound}, got {text}")
        return value

    return parse


_positive_int = _number(int, 1, inclusive=True)
_non_negative_int = _number(int, 0, inclusive=True)
_positive_float = _number(float, 0, inclusive=False)
_positive_seconds = _number(float, 0, inclusive=False, maximum=MAX_SECONDS)
_non_negative_seconds = _number(float, 0, inclusive=True, maximum=MAX_SECONDS)


def path_argument(text: str) -> Path:
    """argparse type: a non-empty path (``Path("")`` is ``.``, a directory never given)."""
    if not text:
        raise argparse.ArgumentTypeError("is empty; give a path")
    return Path(text)


def _model_path(text: str) -> str:
    """argparse type: a Hub id, or a local path (``/``, ``.`` or ``~`` first) that exists."""
    try:
        os.lstat(os.path.expanduser(text)) if text.startswith(("/", ".", "~")) else None
    except OSError as error:  # too long, not searchable: cli's path check names it
        if isinstance(error, FileNotFoundError | NotADirectoryError):
            raise argparse.ArgumentTypeError(f"{text}: {error.strerror} (nor a Hub id)") from None
    return text


def _alpha(text: str) -> float:
    value = _positive_float(text)
    if value >= 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {text}")
    return value


def _subject_list(text: str) -> tuple[str, ...]:
    return tuple(s.strip() for s in text.split(",") if s.strip())


# Options whose value is itself a command line, so it may start with "-".
COMMAND_LINE_OPTIONS: tuple[str, ...] = ("--a-args", "--b-args", "--launcher")


def attach_command_line_values(argv: Sequence[str]) -> list[str]:
    """``--b-args --disable-cuda-graph`` -> ``--b-args=--disable-cuda-graph``, read as a value."""
    out: list[str] = []
    words = iter(argv)
    for word in words:
        value = next(words, None) if word in COMMAND_LINE_OPTIONS else None
        out.append(word if value is None else f"{word}={value}")
    return out


def add_accuracy_parser(subparsers: argparse._SubParsersAction) -> None:
    """Add ``accuracy {run,ab,compare}``; ``args.func(args)`` returns the exit code."""
    parser = subparsers.add_parser(
        "accuracy",
        help="MMLU-format accuracy A/B check: ab starts a server per side; run asks a "
        "server you started; compare pairs two runs",
        description="MMLU-format accuracy A/B check (McNemar). 'ab' starts the server once per "
        "side and compares the two; 'run' asks a server you started yourself; 'compare' pairs "
        "two runs, ours or sgl-eval's.",
    )
    commands = parser.add_subparsers(dest="accuracy_command", required=True, metavar="COMMAND")
    run = commands.add_parser(
        "run",
        help="evaluate MMLU-format questions against a running server",
        description=(
            "Ask a running SGLang server every question of an MMLU-format directory "
            "(DIR/dev/*_dev.csv, DIR/test/*_test.csv) or of a Hugging Face dataset (cais/mmlu) "
            "with greedy decoding and record the answers in OUT. Answers are saved as they "
            "arrive in OUT.partial.jsonl; rerunning the same command resumes, and no rerun "
            "deletes a stored answer. Exit 0: every question answered; 2: bad input; 3: the "
            "server did not answer every question; 70: a bug of this tool (traceback saved to "
            "a file); 71: the environment (stdout cannot be written, ...); 130: interrupted."
        ),
    )
    run.add_argument(
        "--base-url", default="http://127.0.0.1:30000", help="server URL (%(default)s)"
    )
    run.add_argument(
        "--out", required=True, type=path_argument, metavar="RUN.json", help="result file"
    )
    run.add_argument(
        "--api",
        choices=("native", "openai"),
        default="native",
        help="native: SGLang /generate (default); openai: /v1/completions",
    )
    run.add_argument("--model", default="default", help="model name for --api openai")
    _add_question_options(run)
    run.set_defaults(func=_cmd_run)

    ab = commands.add_parser(
        "ab",
        help="start a server per side, run both, compare (is B worse than A?)",
        description=(
            "For side A, then side B: start LAUNCHER --model-path M --host 127.0.0.1 --port "
            "PORT <side args>, wait for /health, ask the questions as 'run' does, stop the "
            "server's process group. Then compare the two runs with McNemar's test. Exit 0: B "
            "is not significantly worse than A; 1: it is; 2: bad input; 3: a server did not "
            "start or answer (the last 40 lines of its log are shown); 70: a bug of this tool "
            "(traceback saved to a file); 71: the environment (stdout cannot be written, ...); "
            "130: interrupted. Rerunning the same command resumes."
        ),
    )
    ab.add_argument(
        "--model-path", required=True, type=_model_path, metavar="M", help="model for both servers"
    )
    _add_valued_options(ab, _AB_OPTIONS)
    _add_comparison_options(ab)
    _add_question_options(ab)
    ab.set_defaults(func=_cmd_ab)

    compare = commands.add_parser(
        "compare",
        help="paired McNemar comparison of two runs (ours or sgl-eval's)",
        description=(
            "Pair two runs by question id and test whether B differs from A "
            "(McNemar: exact binomial below 25 discordant pairs, else continuity-corrected "
            "chi-square). Each side is a run file of 'accuracy run'/'ab', or an sgl-eval run: "
            "its directory (sgl_eval_<bench>_<stamp>/) or one of its output-rs<k>.jsonl "
            "files. Two sgl-eval directories with k repeats are paired repeat by repeat "
            "(rs0 with rs0, ...), one test per repeat; repeats are never pooled. Exit 0: B is "
            "not significantly worse than A (in any repeat); 1: it is; 2: bad input; 70: a bug "
            "of this tool (traceback saved to a file); 71: the environment (stdout cannot be "
            "written, ...)."
        ),
    )
    compare.add_argument("run_a", type=path_argument, metavar="A")
    compare.add_argument("run_b", type=path_argument, metavar="B")
    compare.add_argument(
        "--allow-partial",
        action="store_true",
        help="compare an sgl-eval run whose metrics.json says partial: true (or is missing)",
    )
    compare.add_argument(
        "--allow-different-settings",
        action="store_true",
        help="compare runs whose answer-changing settings differ (--shots, --max-new-tokens, "
        "--api; sgl-eval: benchmark, sampling, versions); each difference is named in a NOTE",
    )
    _add_comparison_options(compare)
    compare.set_defaults(func=_cmd_compare)


def _add_comparison_options(parser: argparse.ArgumentParser) -> None:
    """How the verdict is reached and shown: shared by ``compare`` and ``ab``."""
    parser.add_argument(
        "--alpha", type=_alpha, default=0.05, help="significance level (default 0.05)"
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


def _add_question_options(parser: argparse.ArgumentParser) -> None:
    """What to ask and how: shared by ``run`` and ``ab``."""
    parser.add_argument(
        "--data",
        required=True,
        metavar="DIR|ID",
        help="MMLU csv folder, or a Hugging Face dataset id (cais/mmlu: config all, dev, test)",
    )
    _add_valued_options(parser, _QUESTION_OPTIONS)
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bar (default: only when stderr is a terminal)",
    )


def _shell_words(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError as exc:
        message = f"cannot split {text!r} like a shell line: {exc}"
        raise argparse.ArgumentTypeError(message) from None


def _server_args(text: str) -> tuple[str, ...]:
    """A side's server flags, without those ab sets itself (also as ``--port=N``): a side's own
    copy would start a server the tool cannot reach."""
    words = _shell_words(text)
    names = (word.split("=", 1)[0] for word in words)
    flag = next((name for name in names if name in ("--model-path", "--host", "--port")), None)
    if flag is not None:
        raise argparse.ArgumentTypeError(
            f"{flag} is set by ab itself (--model-path for both sides; host and port are a "
            "free loopback port); remove it"
        )
    return tuple(words)


def _launcher(text: str) -> tuple[str, ...]:
    words = _shell_words(text)
    if not words:
        raise argparse.ArgumentTypeError("is empty; give the command that starts a server")
    return tuple(words)


# flag, type, default, metavar, help: the options that take a value, in --help order.
_Option = tuple[str, Callable[[str], object], object, str, str]
_AB_OPTIONS: tuple[_Option, ...] = (
    (
        "--a-args",
        _server_args,
        (),
        "ARGS",
        'side A\'s server flags, one shell-quoted string (e.g. "--attention-backend triton")',
    ),
    (
        "--b-args",
        _server_args,
        (),
        "ARGS",
        'side B\'s server flags (a single flag works too: --b-args "--disable-cuda-graph")',
    ),
    (
        "--out-dir",
        path_argument,
        Path("accuracy-ab"),
        "DIR",
        "run files A.json, B.json and server logs (%(default)s)",
    ),
    (
        "--launcher",
        _launcher,
        None,
        "CMD",
        "server command, split like a shell line (default: this Python -m sglang.launch_server)",
    ),
    ("--startup-timeout", _positive_seconds, 1200.0, "S", "seconds to wait for /health (1200)"),
    (
        "--stop-grace",
        _non_negative_seconds,
        30.0,
        "S",
        "seconds between SIGINT and SIGKILL when stopping a server (30)",
    ),
)
_QUESTION_OPTIONS: tuple[_Option, ...] = (
    ("--shots", _non_negative_int, 5, "K", "few-shot examples (5)"),
    ("--parallel", _positive_int, 64, "N", "concurrent requests (64)"),
    ("--subjects", _subject_list, None, "S1,S2", "only these subjects (default all)"),
    ("--limit", _positive_int, None, "N", "first N questions per subject"),
    ("--timeout", _positive_seconds, 120.0, "S", "per-request seconds (120)"),
    ("--max-retries", _non_negative_int, 3, "N", "retries per question (3)"),
    (
        "--backoff",
        _non_negative_seconds,
        0.5,
        "S",
        "first retry delay in seconds, doubled per retry (default 0.5)",
    ),
    ("--max-new-tokens", _positive_int, 2, "N", "tokens to generate (2)"),
)


def _add_valued_options(parser: argparse.ArgumentParser, options: tuple[_Option, ...]) -> None:
    for flag, kind, default, metavar, text in options:
        parser.add_argument(flag, type=kind, default=default, metavar=metavar, help=text)


def _run_config(args: argparse.Namespace, base_url: str, out: Path, **extra: Any) -> RunConfig:
    from sglang_nvfp4_patches.accuracy.run import RunConfig

    same = ("shots", "max_new_tokens", "parallel", "subjects", "limit", "max_retries", "progress")
    return RunConfig(
        base_url=base_url,
        data_dir=args.data,
        out=out,
        timeout_s=args.timeout,
        backoff_s=args.backoff,
        **{name: getattr(args, name) for name in same},
        **extra,
    )


def _cmd_run(args: argparse.Namespace) -> int:
    from sglang_nvfp4_patches.accuracy.report import format_run_report, kept_line, run_notes
    from sglang_nvfp4_patches.accuracy.run import Api, run_accuracy
    from sglang_nvfp4_patches.accuracy.store import answers_on_disk as on_disk
    from sglang_nvfp4_patches.accuracy.store import ensure_output_file, run_file_lock

    try:
        config = _run_config(args, args.base_url, args.out, api=Api(args.api), model=args.model)
        ensure_output_file(args.out, "--out")  # before the data is read or a question asked
        items = config.load_items()
        with run_file_lock(args.out, "--out"):
            outcome = run_accuracy(
                config, items, lambda line: print(line, file=sys.stderr, flush=True)
            )
            if outcome.interrupted:
                raise KeyboardInterrupt
    except KeyboardInterrupt:  # before, during or after the questions: say what is on disk
        kept = kept_line(*on_disk(args.out), "rerun the same command to resume")
        print(f"interrupted; {kept}", file=sys.stderr)
        return EXIT_INTERRUPTED
    report = format_run_report(outcome)
    if report:
        print(report)
    for note in run_notes(outcome):  # warnings and errors: stderr
        print(note, file=sys.stderr)
    return outcome.exit_code


def _cmd_ab(args: argparse.Namespace) -> int:
    from sglang_nvfp4_patches.accuracy.ab import DEFAULT_LAUNCHER, AbConfig, log_tail, run_ab
    from sglang_nvfp4_patches.accuracy.compare import verdict_exit_code
    from sglang_nvfp4_patches.accuracy.report import format_comparison

    status = _StatusLines(sys.stderr)
    try:
        config = AbConfig(
            model_path=args.model_path,
            sides={"A": args.a_args, "B": args.b_args},
            out_dir=args.out_dir,
            launcher=args.launcher or DEFAULT_LAUNCHER,
            startup_timeout_s=args.startup_timeout,
            stop_grace_s=args.stop_grace,
            alpha=args.alpha,
            questions=_run_config(args, "http://127.0.0.1", args.out_dir / "A.json"),
        )
        comparison = run_ab(config, status.say, status.tick)
    except UsageError:
        status.end_line()  # the top-level CLI prints the error line; it starts a clean line
        raise
    except ServerError as exc:
        tail = log_tail(exc.log)
        status.say(f"error: {exc}")
        status.say(f"last {len(tail)} line(s) of {exc.log}:")
        for line in tail:
            status.say(f"  {printable(line)}")
        return EXIT_SERVER
    except KeyboardInterrupt:
        status.say(
            f"interrupted; servers stopped; answers so far are kept in {args.out_dir}; "
            "rerun the same command to resume"
        )
        return EXIT_INTERRUPTED
    print(
        json.dumps(comparison.to_json(), indent=2) if args.json else format_comparison(comparison)
    )
    return verdict_exit_code([comparison])


class _StatusLines:
    """Status lines on stderr; on a terminal the health-wait progress redraws one line."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._tty = stream.isatty()
        self._open = False  # a progress line without its newline is on screen

    def say(self, line: str) -> None:
        self.end_line()  # the status line replaces the progress line
        print(line, file=self._stream, flush=True)

    def end_line(self) -> None:
        """Erase the progress line, if one is on screen."""
        if self._open:
            self._stream.write("\r\x1b[K")
            self._stream.flush()
            self._open = False

    def tick(self, text: str) -> None:
        if self._tty:
            self._stream.write(f"\r{text}\x1b[K")
            self._stream.flush()
            self._open = True


def _cmd_compare(args: argparse.Namespace) -> int:
    from sglang_nvfp4_patches.accuracy.compare import compare_runs, paired_runs, verdict_exit_code
    from sglang_nvfp4_patches.accuracy.report import format_comparison, repeats_note

    pairs = paired_runs(args.run_a, args.run_b, allow_partial=args.allow_partial)
    comparisons = [
        compare_runs(a, b, args.alpha, allow_different_settings=args.allow_different_settings)
        for a, b in pairs
    ]
    if args.json:
        documents = [c.to_json() for c in comparisons]
        print(json.dumps(documents[0] if len(documents) == 1 else documents, indent=2))
    else:
        print("\n\n".join(format_comparison(c) for c in comparisons))
        if len(comparisons) > 1:
            print(f"\n{repeats_note(len(comparisons), args.alpha)}")
    return verdict_exit_code(comparisons)
