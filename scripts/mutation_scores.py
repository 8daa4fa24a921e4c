"""Score per module of a finished mutmut run: killed / total, then every mutant not killed.

    python scripts/mutation_scores.py MUTANTS_DIR [MUTANT_GLOB ...]

Reads the ``*.py.meta`` files mutmut 3.x writes beside each mutated module. Exits 1 when a
mutant survived or was not checked (timeouts, suspicious ones and mutants no test reaches
count as not killed and are listed with their status).
"""

from __future__ import annotations

import fnmatch
import json
import sys
from pathlib import Path

from mutmut.stats import status_by_exit_code

KILLED = frozenset({"killed", "caught by type check"})


def module_results(meta: Path, selected: list[str]) -> dict[str, str]:
    """Mutant name -> mutmut's status for one module's meta file (only names matching one of
    ``selected``, when given)."""
    exit_codes = json.loads(meta.read_text())["exit_code_by_key"]
    return {
        name: status_by_exit_code[code]
        for name, code in sorted(exit_codes.items())
        if not selected or any(fnmatch.fnmatch(name, pattern) for pattern in selected)
    }


def main(mutants_dir: Path, selected: list[str]) -> int:
    metas = sorted(mutants_dir.rglob("*.py.meta"))
    if not metas:
        print(f"no mutmut results under {mutants_dir}", file=sys.stderr)
        return 2
    not_killed: list[str] = []
    total_killed = total = 0
    print(f"{'module':62} {'killed':>7} / {'total':<5}")
    for meta in metas:
        results = module_results(meta, selected)
        if not results:
            continue
        module = str(meta.relative_to(mutants_dir)).removesuffix(".meta")
        killed = sum(status in KILLED for status in results.values())
        total_killed, total = total_killed + killed, total + len(results)
        print(f"{module:62} {killed:>7} / {len(results):<5}")
        not_killed += [f"  {name}: {s}" for name, s in results.items() if s not in KILLED]
    print(f"{'all':62} {total_killed:>7} / {total:<5}")
    if not_killed:
        print(f"\nnot killed ({len(not_killed)}; `mutmut show NAME` in the work dir):")
        print("\n".join(not_killed))
    return 1 if not_killed else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), sys.argv[2:]))
