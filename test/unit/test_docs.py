"""README.md and docs/*.md: their size, their links, their blocks and their option tables
against ``--help`` (pure: the parser is built without SGLang). What the quoted outputs say is
checked by running them: test/integration/test_docs_outputs.py and test_next_release.py."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from sglang_nvfp4_patches import cli
from support.doc_blocks import (
    CONTEXTS,
    REPO,
    Example,
    blocks,
    documents,
    examples,
    mismatch,
    problem_with,
)

README = REPO / "README.md"
COMMANDS = REPO / "docs" / "commands.md"
LANGUAGES = {"bash", "console", "python", "text", "json"}
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def test_the_readme_is_at_most_300_lines() -> None:
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 300


WIDEST = 160  # columns; prose is wrapped near 100, a table row may run to this


def wide_lines(path: Path) -> list[str]:
    """``name:line: width`` of each line wider than WIDEST outside fenced blocks (those quote a
    tool's output verbatim, checked against it: support.doc_blocks)."""
    wide = []
    fenced = False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and len(line) > WIDEST:
            wide.append(f"{path.name}:{number}: {len(line)} columns")
    return wide


def test_no_line_outside_a_fenced_block_is_wider_than_160_columns() -> None:
    """Once ~160 lines ran to 830 columns (table rows, prose): unreadable in a terminal or a
    diff. Restructure a wide table (key columns, details in a list below it) rather than widen."""
    assert [wide for path in documents() for wide in wide_lines(path)] == []


def test_a_wide_line_is_found_and_a_wide_quoted_output_is_not(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    row = "| a | " + "x" * 160 + " |"
    doc.write_text(f"# Doc\n\n{row}\n\n```console\n$ tool\n{'y' * 200}\n```\n{'z' * 160}\n")
    assert wide_lines(doc) == ["doc.md:3: 168 columns"]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but `-` dropped, spaces to `-`."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = path.read_text(encoding="utf-8")
    inside = False
    found = set()
    for line in text.splitlines():
        if line.startswith("```"):
            inside = not inside
        elif not inside and line.startswith("#"):
            found.add(slug(line.lstrip("#")))
    return found


def broken_links(path: Path) -> list[str]:
    broken = []
    for target in _LINK.findall(path.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):
            continue
        file_part, _, anchor = target.partition("#")
        resolved = (path.parent / file_part).resolve() if file_part else path
        if not resolved.exists():
            broken.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{target}: no heading #{anchor} in {resolved.name}")
    return broken


@pytest.mark.parametrize("path", documents(), ids=lambda p: p.name)
def test_every_relative_link_resolves(path: Path) -> None:
    assert broken_links(path) == []


def test_a_link_to_a_missing_file_or_heading_is_found(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Real heading: `here`\n")
    doc = tmp_path / "doc.md"
    doc.write_text(
        "[a](other.md#real-heading-here) [b](missing.md) [c](other.md#gone) [d](#top)\n# Top\n"
    )
    assert broken_links(doc) == [
        "missing.md: no such file",
        "other.md#gone: no heading #gone in other.md",
    ]


@pytest.mark.parametrize("path", documents(), ids=lambda p: p.name)
def test_every_block_says_what_it_holds_and_every_console_block_parses(path: Path) -> None:
    for block in blocks(path):
        assert block.language in LANGUAGES, (
            f"{block.where}: a fenced block needs a language: console for quoted output (it is "
            "checked), bash/python for what to type, text for a synopsis"
        )
        assert block.context in CONTEXTS, block.where
        if block.language == "console":
            assert examples(block), f"{block.where}: a console block with no `$ ` command"


def test_the_docs_quote_doctor_verify_explain_and_the_demo() -> None:
    quoted = [
        " ".join(example.argv)
        for block in blocks(COMMANDS)
        if block.language == "console"
        for example in examples(block)
    ]
    for command in ("doctor", "verify", "explain", "demo_accuracy_ab.py"):
        assert any(command in line for line in quoted), command


def test_the_matcher_skips_numbers_and_dots_and_nothing_else() -> None:
    printed = ["verify: 8 held, 0 failed on SGLang 0.5.23 (17 s)", "a", "b", "last line"]
    assert (
        mismatch(["verify: 3 held, 1 failed on SGLang 0.5.24 (9 s)", "...", "last line"], printed)
        is None
    )
    assert (
        mismatch(["verify: 8 held, ... (17 s)", "a", "...", "line"], printed) is not None
    )  # "line" != "last line"
    assert (
        mismatch(["verify: 8 held, 0 FAILED on SGLang 0.5.23 (17 s)", "..."], printed) is not None
    )
    assert mismatch(["verify: 8 held, 0 failed on SGLang 0.5.23 (17 s)", "a"], printed) is not None
    assert mismatch(["...", "a", "b", "last line", "more"], printed) is not None


def option_tables(path: Path) -> dict[str, set[str]]:
    """``{command: options}`` from the tables whose first column is `option`, under each
    `## \\`command\\`` heading (the accuracy table: one row per subcommand, and a row with an
    empty first cell goes on with the row above)."""
    tables: dict[str, set[str]] = {}
    command = ""
    header = ""
    name = ""
    for line in path.read_text(encoding="utf-8").splitlines():
        heading = re.match(r"^##+ `([a-z ]+)`", line)
        if heading:
            command, header = heading.group(1), ""
        elif line.startswith("| ") and not header:
            header = line
        elif line.startswith("|") and not line.startswith("|---"):
            first, _, rest = line.strip("|").partition("|")
            if header.startswith("| option"):
                tables.setdefault(command, set()).update(_OPTION.findall(first))
            elif header.startswith("| command"):
                if first.strip():
                    name = f"{command} {first.strip().strip('`').split()[0]}"
                tables.setdefault(name, set()).update(_OPTION.findall(rest))
        elif not line.startswith("|"):
            header = ""
    return tables


def subcommand(command: str) -> argparse.ArgumentParser:
    """The parser of ``command`` (``"accuracy run"``), as ``cli.build_parser`` builds it."""
    parser = cli.build_parser()
    for word in command.split():
        (subparsers,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        parser = subparsers.choices[word]
    return parser


def help_options(command: str) -> set[str]:
    parser = subcommand(command)
    return {o for a in parser._actions for o in a.option_strings if o.startswith("--")} - {"--help"}


def test_the_option_tables_name_only_options_their_commands_have_and_every_one() -> None:
    tables = option_tables(COMMANDS)
    assert set(tables) == {
        "doctor",
        "verify",
        "explain",
        "accuracy ab",
        "accuracy run",
        "accuracy compare",
    }
    docs = "\n".join(p.read_text(encoding="utf-8") for p in documents())
    for command, named in tables.items():
        have = help_options(command)
        assert named <= have, f"{command}: the README names {sorted(named - have)}, not in --help"
        missing = {o for o in have - named if f"`{o}" not in docs}
        assert not missing, f"{command}: --help has {sorted(missing)}, which no option table names"


def test_accuracy_help_says_that_ab_starts_its_own_servers() -> None:
    description = " ".join(str(subcommand("accuracy").description).split())
    assert "starts the server once per side" in description
    assert "a server you started yourself" in description
    assert "against a running" not in " ".join(subcommand("").format_help().split())


def test_a_run_must_end_with_the_quoted_status_and_print_the_quoted_lines() -> None:
    quoted_exit_1 = Example("doc.md:1+1", {}, ["sglang-nvfp4-patches", "doctor"], 1, ["ok 3"])
    assert problem_with(quoted_exit_1, 1, "ok 7\n") is None
    assert "exit 0, quoted 1" in str(problem_with(quoted_exit_1, 0, "ok 7\n"))
    assert "printed 'not ok'" in str(problem_with(quoted_exit_1, 1, "not ok\n"))
    unquoted_exit = Example("doc.md:1+1", {}, ["sglang-nvfp4-patches", "doctor"], None, [])
    assert "exit 1, quoted 0" in str(problem_with(unquoted_exit, 1, ""))


def test_the_readme_says_how_long_verify_takes_as_verify_does() -> None:
    """Once "~20 s" in the docs where a newcomer measured 35-49 s under load."""
    from sglang_nvfp4_patches.verify.run import DURATION

    (line,) = [line for line in README.read_text().splitlines() if "patches verify  " in line]
    assert f"({DURATION})" in line or f", {DURATION})" in line


def test_a_block_typed_after_setup_calls_the_tool_from_the_setup_venv() -> None:
    """Once the README's `accuracy run` beside `.venv/bin/python scripts/demo...` was typed
    bare: `command not found` after `scripts/setup.sh`."""
    bare = re.compile(r"\s*(sglang-nvfp4-patches|python) ")
    wrong = [
        f"{block.where}: {line}"
        for path in documents()
        for block in blocks(path)
        if block.language == "bash" and any(".venv/bin/" in line for line in block.body)
        for line in block.body
        if bare.match(line)
    ]
    assert wrong == []


def test_no_paragraph_ends_on_a_colon_that_introduces_nothing() -> None:
    """Once docs/commands.md's "Its output (...):" was followed by "The README quotes the
    end of it.": a quote announced and never given."""
    introduces = re.compile(r"(```|- |\* |\||#|<!--|\d+\. )")
    dangling = []
    for path in documents():
        lines = path.read_text(encoding="utf-8").splitlines()
        fenced = False
        for number, line in enumerate(lines):
            fenced ^= line.startswith("```")
            if fenced or line.startswith("```") or not line.rstrip().endswith(":"):
                continue
            rest = [later for later in lines[number + 1 :] if later.strip()]
            ends_paragraph = number + 1 < len(lines) and not lines[number + 1].strip()
            if ends_paragraph and rest and not introduces.match(rest[0]):
                dangling.append(f"{path.name}:{number + 1}: {line.strip()[-60:]}")
    assert dangling == []


_COUNT_WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}


def test_the_package_and_its_description_count_and_name_every_patch() -> None:
    import tomllib

    import sglang_nvfp4_patches
    from sglang_nvfp4_patches.patches import PATCHES

    names = [patch.name for patch in PATCHES]

    count = _COUNT_WORDS[len(names)]
    described = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    summary = sglang_nvfp4_patches.__doc__ or ""
    assert f"fixing {count} " in described["project"]["description"]
    assert f"fixing {count} " in summary
    assert [name for name in names if f"``{name}``" not in summary] == []


def test_the_readme_lists_what_gpu_takes() -> None:
    """Once the README named no --gpu spelling (rtx-pro-6000, dgx-spark, gb10, ...)."""
    from sglang_nvfp4_patches.simulation.gpus import gpu_choices

    text = " ".join(README.read_text(encoding="utf-8").split())
    assert f"`--gpu` takes {gpu_choices()}, in any case" in text
