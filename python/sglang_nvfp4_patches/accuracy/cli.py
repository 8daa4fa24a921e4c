"""Command line for ``accuracy run`` and ``accuracy compare``.

User errors (bad data files, unreadable run files, mismatched resume) print one
``error: ...`` line and exit 2; failed questions exit 1; Ctrl-C exits 130.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from sglang_nvfp4_patches.accuracy.errors import AccuracyError

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def _number(kind: type, minimum: float, inclusive: bool) -> Callable[[str], float]:
    """argparse type: ``kind`` parsed from text and checked against a lower bound."""

    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a {kind.__name__}, got {text!r}") from None
        if value < minimum or (value == minimum and not inclusive):
            bound = f">= {minimum:g}" if inclusive else f"> {minimum:g}"
            raise argparse.ArgumentTypeError(f"must be {bound}, got {text}")
        return value

    return parse


_positive_int = _number(int, 1, inclusive=True)
_non_negative_int = _number(int, 0, inclusive=True)
_positive_float = _number(float, 0, inclusive=False)
_non_negative_float = _number(float, 0, inclusive=True)


def _alpha(text: str) -> float:
    value = _positive_float(text)
    if value >= 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {text}")
    return value


def _subject_list(text: str) -> tuple[str, ...]:
    return tuple(s.strip() for s in text.split(",") if s.strip())


def add_accuracy_parser(subparsers: argparse._SubParsersAction) -> None:
    """Add ``accuracy {run,compare}`` to a parent CLI; ``args.func(args)`` returns the exit code."""
    parser = subparsers.add_parser(
        "accuracy",
        help="MMLU-format accuracy A/B check against a running SGLang server",
        description="MMLU-format accuracy A/B check against a running SGLang server.",
    )
    _add_commands(parser)


def _add_commands(parser: argparse.ArgumentParser) -> None:
    commands = parser.add_subparsers(dest="accuracy_command", required=True, metavar="COMMAND")
    run = commands.add_parser(
        "run",
        help="evaluate MMLU-format questions against a running server",
        description=(
            "Ask a running SGLang server every question of an MMLU-format directory "
            "(DIR/dev/*_dev.csv, DIR/test/*_test.csv) with greedy decoding and record the "
            "answers in OUT. Answers are saved as they arrive in OUT.partial.jsonl; rerunning "
            "the same command resumes."
        ),
    )
    run.add_argument("--base-url", default="http://127.0.0.1:30000", help="server URL")
    run.add_argument("--data", required=True, type=Path, metavar="DIR", help="MMLU data folder")
    run.add_argument("--out", required=True, type=Path, metavar="RUN.json", help="result file")
    run.add_argument(
        "--api",
        choices=("native", "openai"),
        default="native",
        help="native: SGLang /generate (default); openai: /v1/completions",
    )
    run.add_argument("--model", default="default", help="model name for --api openai")
    run.add_argument(
        "--shots", type=_non_negative_int, default=5, metavar="K", help="few-shot examples (5)"
    )
    run.add_argument(
        "--parallel", type=_positive_int, default=64, metavar="N", help="concurrent requests (64)"
    )
    run.add_argument(
        "--subjects", type=_subject_list, metavar="S1,S2", help="only these subjects (default all)"
    )
    run.add_argument(
        "--limit", type=_positive_int, metavar="N", help="first N questions per subject"
    )
    run.add_argument(
        "--timeout",
        type=_positive_float,
        default=120.0,
        metavar="S",
        help="per-request seconds (120)",
    )
    run.add_argument(
        "--max-retries",
        type=_non_negative_int,
        default=3,
        metavar="N",
        help="retries per question (3)",
    )
    run.add_argument(
        "--backoff",
        type=_non_negative_float,
        default=0.5,
        metavar="S",
        help="first retry delay in seconds, doubled per retry (default 0.5)",
    )
    run.add_argument(
        "--max-new-tokens",
        type=_positive_int,
        default=2,
        metavar="N",
        help="tokens to generate (2)",
    )
    run.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bar (default: only when stderr is a terminal)",
    )
    run.set_defaults(func=_cmd_run)

    compare = commands.add_parser(
        "compare",
        help="paired McNemar comparison of two runs",
        description=(
            "Pair two run files by question id and test whether B differs from A "
            "(McNemar: exact binomial below 25 discordant pairs, else continuity-corrected "
            "chi-square)."
        ),
    )
    compare.add_argument("run_a", type=Path, metavar="A.json")
    compare.add_argument("run_b", type=Path, metavar="B.json")
    compare.add_argument(
        "--alpha", type=_alpha, default=0.05, help="significance level (default 0.05)"
    )
    compare.add_argument("--json", action="store_true", help="print the result as JSON")
    compare.set_defaults(func=_cmd_compare)


def _cmd_run(args: argparse.Namespace) -> int:
    from sglang_nvfp4_patches.accuracy.client import Api
    from sglang_nvfp4_patches.accuracy.report import format_run_report
    from sglang_nvfp4_patches.accuracy.run import RunConfig, run_accuracy
    from sglang_nvfp4_patches.accuracy.store import partial_path

    try:
        config = RunConfig(
            base_url=args.base_url,
            data_dir=args.data,
            out=args.out,
            api=Api(args.api),
            model=args.model,
            shots=args.shots,
            max_new_tokens=args.max_new_tokens,
            parallel=args.parallel,
            subjects=args.subjects,
            limit=args.limit,
            timeout_s=args.timeout,
            max_retries=args.max_retries,
            backoff_s=args.backoff,
            progress=args.progress,
        )
        outcome = run_accuracy(config)
    except AccuracyError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(
            f"interrupted; answers already received are kept in {partial_path(args.out)}; "
            "rerun the same command to resume",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    report = format_run_report(outcome)
    print(report, file=sys.stderr if outcome.interrupted else sys.stdout)
    return outcome.exit_code


def _cmd_compare(args: argparse.Namespace) -> int:
    from sglang_nvfp4_patches.accuracy.compare import compare_runs, load_run
    from sglang_nvfp4_patches.accuracy.report import format_comparison

    try:
        comparison = compare_runs(load_run(args.run_a), load_run(args.run_b), alpha=args.alpha)
    except AccuracyError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        print(json.dumps(comparison.to_json(), indent=2))
    else:
        print(format_comparison(comparison))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Standalone entry: ``python -m sglang_nvfp4_patches.accuracy {run,compare} ...``."""
    parser = argparse.ArgumentParser(
        prog="python -m sglang_nvfp4_patches.accuracy",
        description="MMLU-format accuracy A/B check against a running SGLang server.",
    )
    _add_commands(parser)
    args = parser.parse_args(argv)
    return args.func(args)
