#!/usr/bin/env bash
# The test command behind `make test` (and `make test-fast`, which passes -m "not slow"): linters and the type
# checker, then pytest with the arguments given. pytest exits 5 when it collects nothing; `set -e` turns that (and
# any failure) into a failed run.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"
# mypy's cache beside the other per-user caches: a fresh clone on a machine that has checked before starts warm.
export MYPY_CACHE_DIR="${MYPY_CACHE_DIR:-${SEMIF_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/semif-sagemaker}/mypy}"
ruff check .
mypy app.py stacks container/semif_adapter clients/python/semif_decision_client  # strict: pyproject.toml [tool.mypy]
python -m pytest "$@"
