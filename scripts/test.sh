#!/usr/bin/env bash
# Tests: pytest (GPU tests skip without a GPU) and the lit/FileCheck suite.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pytest -q
lit -q lit_tests
