#!/usr/bin/env bash
# Mutation testing (mutmut 3.x, in the `test` extra) of the pure modules against the unit
# tests; not part of CI (it takes minutes). Prints the score per module and every survivor.
#   scripts/mutation.sh                      # every pure module
#   scripts/mutation.sh 'sglang_nvfp4_patches.settings.*'   # some mutants (mutmut's names)
# It works in .mutation/ (git-ignored): a copy of the tree with the package also under src/,
# so that mutmut's module names match the imports (scripts/mutation.cfg), and mutmut's own
# mutants/ beside it. To read a survivor: cd .mutation && ../.venv/bin/mutmut show NAME
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
python="${PYTHON:-$root/.venv/bin/python}"
work="$root/.mutation"

rm -rf "$work"
mkdir -p "$work/src"
cp -R python "$work/python"
cp -R python/sglang_nvfp4_patches "$work/src/sglang_nvfp4_patches"
cp -R test scripts pyproject.toml README.md docs "$work/"
cp scripts/mutation.cfg "$work/setup.cfg"
find "$work" -name __pycache__ -prune -exec rm -rf {} +

cd "$work"
start=$SECONDS
"$python" -m mutmut run "$@"
status=0
"$python" "$root/scripts/mutation_scores.py" mutants --equivalents "$root/scripts/mutation_equivalents.txt" "$@" || status=$?
echo "mutation run: $((SECONDS - start)) s"
exit "$status"
