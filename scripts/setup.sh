#!/usr/bin/env bash
# Create (or refresh) .venv at the repo root: the full SGLang 0.5.23 install with its own
# dependency set, and this project installed editable with its test extras. Safe to rerun.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
SGLANG_VERSION="${SGLANG_VERSION:-0.5.23}"

if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
# torch first, pinned to what SGLang 0.5.23 pins (on this kind of machine it comes from local
# disk), so that resolving SGLang never pulls a different multi-GB torch build.
.venv/bin/python -m pip install --quiet "torch==2.14.1" "torchvision==0.29.1"
.venv/bin/python -m pip install --quiet "sglang==${SGLANG_VERSION}"
.venv/bin/python -m pip install --quiet -e ".[test]"
.venv/bin/python -c "import sglang.srt.plugins, sglang_nvfp4_patches; print('setup ok')"
