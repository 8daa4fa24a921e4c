"""CLI contract, and the accuracy tool being a pure client (no SGLang, torch; lazy aiohttp and
datasets)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from accuracy_support import PYTHON_DIR
from sglang_nvfp4_patches import accuracy
from sglang_nvfp4_patches.accuracy.cli import add_accuracy_parser
from sglang_nvfp4_patches.cli import main
from sglang_nvfp4_patches.errors import EXIT_USAGE, UsageError

_PROBE = """
import json, sys
import sglang_nvfp4_patches.accuracy.cli
import sglang_nvfp4_patches.accuracy.compare
import sglang_nvfp4_patches.accuracy.report
import sglang_nvfp4_patches.accuracy.server
light = sorted(m for m in ("aiohttp", "datasets", "torch", "sglang") if m in sys.modules)
import sglang_nvfp4_patches.accuracy.ab
import sglang_nvfp4_patches.accuracy.hub
import sglang_nvfp4_patches.accuracy.run
heavy = sorted(m for m in ("datasets", "torch", "sglang") if m in sys.modules)
print(json.dumps({"light": light, "heavy": heavy}))
"""


def test_no_sglang_or_torch_and_lazy_aiohttp_and_datasets() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PYTHON_DIR), *sys.path])}
    out = subprocess.run(
        [sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, check=True
    ).stdout
    assert json.loads(out) == {"light": [], "heavy": []}


def _parent() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sglang-nvfp4-patches")
    add_accuracy_parser(parser.add_subparsers(dest="command", required=True))
    return parser


def test_add_accuracy_parser_run_defaults() -> None:
    args = _parent().parse_args(["accuracy", "run", "--data", "d", "--out", "o.json"])
    assert callable(args.func)
    assert (args.base_url, args.api, args.model) == ("http://127.0.0.1:30000", "native", "default")
    assert (args.shots, args.parallel, args.limit, args.subjects) == (5, 64, None, None)
    assert (args.data, args.out) == ("d", Path("o.json"))
    args = _parent().parse_args(
        ["accuracy", "run", "--data", "d", "--out", "o", "--subjects", "a, b,,", "--api", "openai"]
    )
    assert args.subjects == ("a", "b") and args.api == "openai"


def test_run_help_shows_the_base_url_default(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _parent().parse_args(["accuracy", "run", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--base-url BASE_URL server URL (http://127.0.0.1:30000)" in help_text


def test_add_accuracy_parser_ab_defaults() -> None:
    args = _parent().parse_args(
        ["accuracy", "ab", "--model-path", "m", "--data", "cais/mmlu", "--b-args", "-x 1 'a b'"]
    )
    assert callable(args.func)
    assert (args.a_args, args.b_args, args.data) == ((), ("-x", "1", "a b"), "cais/mmlu")
    assert (args.out_dir, args.launcher, args.startup_timeout) == (Path("accuracy-ab"), None, 1200)
    assert (args.shots, args.parallel, args.alpha, args.json) == (5, 64, 0.05, False)


def test_add_accuracy_parser_compare() -> None:
    args = _parent().parse_args(["accuracy", "compare", "a.json", "b.json", "--alpha", "0.01"])
    assert callable(args.func)
    assert (args.run_a, args.run_b, args.alpha, args.json) == (
        Path("a.json"),
        Path("b.json"),
        0.01,
        False,
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["accuracy"],
        ["accuracy", "run", "--out", "o"],
        ["accuracy", "run", "--data", "d", "--out", "o", "--parallel", "0"],
        ["accuracy", "run", "--data", "d", "--out", "o", "--timeout", "-1"],
        ["accuracy", "run", "--data", "d", "--out", "o", "--shots", "x"],
        ["accuracy", "compare", "a.json", "b.json", "--alpha", "1"],
    ],
)
def test_bad_arguments_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        _parent().parse_args(argv)
    assert info.value.code == 2
    assert "error:" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("typed", "expected"),
    [
        (["--b-args", "--disable-cuda-graph"], ("--disable-cuda-graph",)),
        (["--b-args=--disable-cuda-graph"], ("--disable-cuda-graph",)),
        (["--b-args", "--attention-backend trtllm_mha"], ("--attention-backend", "trtllm_mha")),
        (["--b-args", "-x"], ("-x",)),
    ],
)
def test_a_single_server_flag_is_taken_as_typed(typed: list[str], expected: tuple) -> None:
    from sglang_nvfp4_patches.accuracy.cli import attach_command_line_values
    from sglang_nvfp4_patches.cli import build_parser

    argv = ["accuracy", "ab", "--model-path", "m", "--data", "d", "--a-args", "--enable-x", *typed]
    for parser in (_parent(), build_parser()):
        args = parser.parse_args(attach_command_line_values(argv))
        assert (args.a_args, args.b_args) == (("--enable-x",), expected)


@pytest.mark.parametrize("name", sorted(set(accuracy.__all__) - {"ServerError"}))
def test_every_accuracy_input_error_is_a_usage_error(name: str) -> None:
    assert issubclass(getattr(accuracy, name), UsageError)
    assert not issubclass(accuracy.ServerError, UsageError)  # ab's exit 3, with the log tail


def test_the_top_level_cli_prints_accuracy_errors_verbatim(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Accuracy messages quote paths and library errors as they are (whitespace kept), while
    other UsageErrors (SGLang's multi-line refusals) are collapsed onto one line."""
    bad = tmp_path / "two  spaces" / "run.json"
    bad.parent.mkdir()
    bad.write_text("not json", encoding="utf-8")
    assert main(["accuracy", "compare", str(bad), str(bad)]) == EXIT_USAGE
    assert capsys.readouterr().err == (
        f"error: {bad}: not readable JSON (Expecting value: line 1 column 1 (char 0))\n"
    )
    assert UsageError("sglang serve:\n  bad  flag").cli_message() == "sglang serve: bad flag"
