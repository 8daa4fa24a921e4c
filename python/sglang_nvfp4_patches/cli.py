"""``python -m sglang_nvfp4_patches {explain,doctor,accuracy}``."""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Sequence

from sglang_nvfp4_patches import __version__


class UsageError(ValueError):
    """Bad input the user can fix; printed without a traceback, exit status 2."""


def build_parser() -> argparse.ArgumentParser:
    from sglang_nvfp4_patches.accuracy.cli import add_accuracy_parser
    from sglang_nvfp4_patches.doctor import add_doctor_parser
    from sglang_nvfp4_patches.explain import add_explain_parser

    parser = argparse.ArgumentParser(
        prog="python -m sglang_nvfp4_patches",
        description="SGLang plugin for NVFP4 on Blackwell: explain, doctor, accuracy A/B.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True)
    add_explain_parser(subparsers)
    add_doctor_parser(subparsers)
    add_accuracy_parser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from sglang_nvfp4_patches.explain import ModelDirError

    args = build_parser().parse_args(argv)
    # Importing SGLang on a machine without its GPU warns per quantization backend; the
    # table is the output here, not those import-time notes.
    warnings.filterwarnings("ignore", category=UserWarning, module=r"sglang\.")
    try:
        return int(args.func(args))
    except (UsageError, ModelDirError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
