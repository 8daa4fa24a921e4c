#!/usr/bin/env bash
# Run `verify`, then the release-matrix integration tests, against one SGLang release:
#   scripts/test_release.sh 0.5.20 [extra pytest args]
# 0.5.23 is the primary environment itself; other releases are overlaid on it
# (scripts/build_overlay.sh) through PYTHONPATH.
set -euo pipefail
cd "$(dirname "$0")/.."
release="${1:?usage: scripts/test_release.sh SGLANG_RELEASE [pytest args]}"
shift
primary="$(.venv/bin/python -c 'import importlib.metadata as m; print(m.version("sglang"))')"
if [ "$release" = "$primary" ]; then
    overlay=""
else
    overlay="$(scripts/build_overlay.sh "$release")"
fi
# The user's command on the same release first: every check must hold (exit 0). Where no
# evidence record ships for the release, verify records it here, as a user's verify would.
PYTHONPATH="${overlay}" .venv/bin/python -m sglang_nvfp4_patches verify
PYTHONPATH="${overlay}" SGLANG_NVFP4_TEST_RELEASE="$release" \
    .venv/bin/python -m pytest -m release_matrix -p no:cacheprovider "$@"
