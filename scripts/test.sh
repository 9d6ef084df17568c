#!/usr/bin/env bash
# Runs the whole pytest suite; fails when no test ran (pytest exits 5 then, which is a failure).
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBUG="${DEBUG:-1}"
.venv/bin/python -m pytest "$@"
