"""Score per module of a finished mutmut run, and whether what is left is what we accept.

    python scripts/mutation_scores.py MUTANTS_DIR [--equivalents FILE] [MUTANT_GLOB ...]

Reads the ``*.py.meta`` files mutmut 3.x writes beside each mutated module and prints caught
(killed, or timed out) / total per module. A mutant that was not caught (survived, suspicious,
or reached by no test) is accepted only when ``FILE`` lists it by name together with the line(s) the
mutation changed, as read from the mutated module: a name that now points at another mutation
(after its function changed) is not accepted. docs/mutation.md says why each listed one is
equivalent.

Exit status: 0 when every mutant left is listed and every listed one (of the selection) is
still left; 1 when they differ (each difference is printed); 2 when there are no results.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import fnmatch
import json
import sys
from pathlib import Path

from mutmut.stats import status_by_exit_code

# A timeout counts as caught: the mutant made the tests run past mutmut's limit (a loop that
# never ends, in this code), so no run with it could pass.
CAUGHT = frozenset({"killed", "caught by type check", "timeout"})


def module_results(meta: Path, selected: list[str]) -> dict[str, str]:
    """Mutant name -> mutmut's status for one module's meta file (only names matching one of
    ``selected``, when given)."""
    exit_codes = json.loads(meta.read_text())["exit_code_by_key"]
    return {
        name: status_by_exit_code[code]
        for name, code in sorted(exit_codes.items())
        if not selected or any(fnmatch.fnmatch(name, pattern) for pattern in selected)
    }


def function_bodies(module_source: str) -> dict[str, list[str]]:
    """The lines of each function of mutmut's mutated module after its ``def`` line (which
    differs between a mutant and its original by name only), by function name."""
    lines = module_source.splitlines()
    return {
        node.name: lines[node.lineno : node.end_lineno]
        for node in ast.walk(ast.parse(module_source))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }


def mutated_lines(bodies: dict[str, list[str]], function: str) -> str:
    """The lines of mutant ``function`` (``x_f__mutmut_3``) that differ from its original
    (``x_f__mutmut_orig``), stripped and joined with `` / ``; empty when either is missing."""
    original = function.rsplit("__mutmut_", 1)[0] + "__mutmut_orig"
    if function not in bodies or original not in bodies:
        return ""
    diff = difflib.ndiff(bodies[original], bodies[function])
    return " / ".join(line[1:].strip() for line in diff if line.startswith("+ "))


def read_equivalents(path: Path) -> dict[str, str]:
    """``NAME<TAB>mutated lines`` per line of ``path``; ``#`` starts a comment line."""
    entries: dict[str, str] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        name, tab, lines = line.partition("\t")
        if not tab:
            raise ValueError(f"{path}:{number}: expected NAME<TAB>mutated lines, got {line!r}")
        entries[name] = lines
    return entries


def main(mutants_dir: Path, selected: list[str], equivalents: dict[str, str]) -> int:
    metas = sorted(mutants_dir.rglob("*.py.meta"))
    if not metas:
        print(f"no mutmut results under {mutants_dir}", file=sys.stderr)
        return 2
    left: dict[str, tuple[str, str]] = {}  # name -> (status, mutated lines)
    total_caught = total = timeouts = 0
    print(f"{'module':62} {'caught':>7} / {'total':<5}")
    for meta in metas:
        results = module_results(meta, selected)
        if not results:
            continue
        module = meta.with_suffix("")
        bodies = function_bodies(module.read_text(encoding="utf-8"))
        caught = sum(status in CAUGHT for status in results.values())
        timeouts += sum(status == "timeout" for status in results.values())
        total_caught, total = total_caught + caught, total + len(results)
        print(f"{module.relative_to(mutants_dir)!s:62} {caught:>7} / {len(results):<5}")
        for name, status in results.items():
            if status not in CAUGHT:
                left[name] = (status, mutated_lines(bodies, name.rsplit(".", 1)[-1]))
    print(f"{'all':62} {total_caught:>7} / {total:<5} ({timeouts} of them by timeout)")
    accepted = [name for name, (_, lines) in left.items() if equivalents.get(name) == lines]
    new = [name for name in left if name not in accepted]
    listed = [
        n for n in equivalents if not selected or any(fnmatch.fnmatch(n, p) for p in selected)
    ]
    gone = [name for name in listed if name not in left]
    print(f"\nleft: {len(left)}, of which {len(accepted)} listed as equivalent")
    if new:
        print(f"\nnot killed and not listed as equivalent ({len(new)}; kill each with a test, or")
        print("list it with its reason: `mutmut show NAME` in the work dir):")
        for name in new:
            status, lines = left[name]
            print(f"  {name}: {status}: {lines}")
            if name in equivalents:
                print(f"    (listed for another mutation: {equivalents[name]})")
    if gone:
        print(f"\nlisted as equivalent but not left now ({len(gone)}; remove from the list):")
        print("\n".join(f"  {name}" for name in gone))
    return 1 if new or gone else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mutants_dir", type=Path)
    parser.add_argument("patterns", nargs="*", help="mutant names (fnmatch) to score")
    parser.add_argument("--equivalents", type=Path, help="the accepted survivors, if any")
    args = parser.parse_intermixed_args()
    accepted = read_equivalents(args.equivalents) if args.equivalents else {}
    sys.exit(main(args.mutants_dir, args.patterns, accepted))
