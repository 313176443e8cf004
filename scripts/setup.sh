#!/usr/bin/env bash
# Set-up: install CuBridge (editable) with its test tools into the current python3.
# Where torch is missing it installs torch 2.13.0 (the CPU build on machines without a GPU
# in this workplace); an existing torch, e.g. a CUDA build on a GPU machine, is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! python3 -c "import torch" >/dev/null 2>&1; then
    python3 -m pip install --quiet "torch==2.13.0"
fi
python3 -m pip install --quiet -e ".[dev]"
