#!/usr/bin/env bash
# The test command behind `make test`: linters, then the whole pytest suite.
# pytest exits 5 when it collects nothing; `set -e` turns that (and any failure) into a failed run.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
ruff check .
python -m pytest "$@"
