#!/usr/bin/env bash
# Add an SGLang release to the tested window, in one step:
#   scripts/add_release.sh 0.5.24
# Overlays sglang==X on the primary environment with the pins its own wheel declares
# (scripts/build_overlay.sh: no environment variable needed), runs the release matrix and
# `verify` on it (scripts/test_release.sh), shows what `doctor` says there, and prints what to
# change. It edits no file: a release joins the window only by a reviewed commit.
set -uo pipefail
cd "$(dirname "$0")/.."
release="${1:?usage: scripts/add_release.sh SGLANG_RELEASE}"

overlay="$(scripts/build_overlay.sh "$release")" || {
    echo "add_release: could not overlay sglang==${release} (see above)" >&2
    exit 1
}
# Opted in, so the patches act on the new release as they would once it is tested.
export SGLANG_NVFP4_PATCHES_UNTESTED=apply
if ! scripts/test_release.sh "$release" -q; then
    echo "add_release: the release matrix or verify FAILED on SGLang ${release}; do not add it" >&2
    exit 1
fi
echo
echo "doctor on SGLang ${release} (opted in):"
PYTHONPATH="$overlay" .venv/bin/python -m sglang_nvfp4_patches doctor
newest="$(.venv/bin/python -c 'from sglang_nvfp4_patches.supported_releases import NEWEST_TESTED; print(NEWEST_TESTED)')"
listed="$(.venv/bin/python -c 'import sys; from sglang_nvfp4_patches.supported_releases import TESTED_RELEASES; print("already listed" if sys.argv[1] in TESTED_RELEASES else "not listed yet")' "$release")"
cat <<TODO

SGLang ${release} passed the release matrix and verify. To add it:
  1. python/sglang_nvfp4_patches/supported_releases.py: add "${release}" to TESTED_RELEASES
     (${listed}; CI runs every entry; the window's upper bound follows the newest entry,
     today ${newest}).
  2. .venv/bin/python scripts/release_facts.py ${release}: ships its row of release facts
     (verify kept it on this machine only; CI's verify checks the shipped row on every
     release).
  3. docs/releases.md: the per-release table (from doctor's lines above); README.md: the
     first-screen table and the window's bounds in the text.
Then run .ci/run (each release adds about 1 min with two jobs at a time: keep it under 30 min).
TODO
