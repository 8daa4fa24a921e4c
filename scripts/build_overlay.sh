#!/usr/bin/env bash
# Build (or reuse) an overlay of an SGLang release on top of the primary .venv:
#   scripts/build_overlay.sh 0.5.20   -> prints the overlay directory
# The overlay holds only that release's `sglang` (no dependencies) plus the Hugging Face stack
# its wheel pins where the primary environment does not satisfy it (scripts/overlay_pins.py
# reads the wheel's Requires-Dist; nothing here names a release). Put the directory first on
# PYTHONPATH and the .venv's interpreter imports that SGLang, on the .venv's torch 2.14.1 and
# FlashInfer. Overlays are cached under $SGLANG_NVFP4_OVERLAY_CACHE (default ~/.cache/...),
# keyed by what was installed (the release and each pin), rebuilt when incomplete, and checked
# by importing SGLang's server arguments from them once, when built.
set -euo pipefail
cd "$(dirname "$0")/.."

release="${1:?usage: scripts/build_overlay.sh SGLANG_RELEASE}"
cache="${SGLANG_NVFP4_OVERLAY_CACHE:-$HOME/.cache/sglang-nvfp4-patches/overlays}"

if pins_text="$(.venv/bin/python scripts/overlay_pins.py "$release")"; then
    mapfile -t pins <<< "$pins_text"
    [ -n "${pins[0]:-}" ] || pins=()
else
    # No index to ask (offline): the one complete overlay of this release, if there is one.
    found=()
    for dir in "$cache/sglang-${release}" "$cache/sglang-${release}-"*; do
        if [ -f "$dir/.complete" ] && [ "$(cat "$dir/.release" 2>/dev/null)" = "$release" ]; then
            found+=("$dir")
        fi
    done
    if [ "${#found[@]}" -eq 1 ]; then
        echo "build_overlay: using the cached overlay ${found[0]}" >&2
        echo "${found[0]}"
        exit 0
    fi
    echo "build_overlay: cannot tell what SGLang ${release} pins (see above)," \
        "and ${#found[@]} cached overlays of it are complete" >&2
    exit 1
fi

key="sglang-${release}"
for pin in "${pins[@]}"; do key="${key}-${pin/==/-}"; done
dir="$cache/$key"
if [ ! -f "$dir/.complete" ]; then
    rm -rf "$dir"
    mkdir -p "$dir"
    echo "build_overlay: installing sglang==${release} ${pins[*]} into $dir" >&2
    .venv/bin/python -m pip install --quiet --no-deps --no-compile --target "$dir" \
        "sglang==${release}" "${pins[@]}" >&2
    if ! PYTHONPATH="$dir" .venv/bin/python -c "import sglang.srt.server_args" >&2; then
        echo "build_overlay: SGLang ${release} does not import from $dir (see above)" >&2
        exit 1
    fi
    echo "$release" > "$dir/.release"
    touch "$dir/.complete"
fi
echo "$dir"
