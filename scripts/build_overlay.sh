#!/usr/bin/env bash
# Build (or reuse) an overlay of an older SGLang release on top of the primary .venv:
#   scripts/build_overlay.sh 0.5.20   -> prints the overlay directory
# The overlay holds only that release's `sglang` (no dependencies) plus the transformers /
# tokenizers it pins, installed with `pip --target`; put it first on PYTHONPATH and the
# .venv's interpreter imports that SGLang, on the .venv's torch 2.14.1 and FlashInfer.
# Overlays are cached under $SGLANG_NVFP4_OVERLAY_CACHE (default ~/.cache/...), keyed by
# release and pins, and rebuilt when incomplete.
set -euo pipefail
cd "$(dirname "$0")/.."

release="${1:?usage: scripts/build_overlay.sh SGLANG_RELEASE}"
case "$release" in
    0.5.12|0.5.12.post1) extra=("transformers==5.6.0" "tokenizers==0.22.2") ;;
    0.5.13|0.5.13.post1|0.5.14) extra=("transformers==5.8.1" "tokenizers==0.22.2") ;;
    0.5.15.post1|0.5.18|0.5.20) extra=("transformers==5.12.1" "tokenizers==0.22.2") ;;
    0.5.22|0.5.23) extra=() ;;  # same transformers as the primary environment
    *)  # a release not seen yet (scripts/add_release.sh): pins from the caller, else none
        read -r -a extra <<< "${SGLANG_NVFP4_OVERLAY_PINS:-}"
        echo "build_overlay: no known pins for SGLang $release; using" \
            "${SGLANG_NVFP4_OVERLAY_PINS:-the transformers and tokenizers of the primary environment}" \
            "(set SGLANG_NVFP4_OVERLAY_PINS='transformers==A tokenizers==B' to pin)" >&2 ;;
esac

cache="${SGLANG_NVFP4_OVERLAY_CACHE:-$HOME/.cache/sglang-nvfp4-patches/overlays}"
key="sglang-${release}"
for pin in "${extra[@]}"; do key="${key}-${pin/==/-}"; done
dir="$cache/$key"
if [ ! -f "$dir/.complete" ]; then
    rm -rf "$dir"
    mkdir -p "$dir"
    .venv/bin/python -m pip install --quiet --no-deps --no-compile --target "$dir" \
        "sglang==${release}" "${extra[@]}" >&2
    touch "$dir/.complete"
fi
echo "$dir"
