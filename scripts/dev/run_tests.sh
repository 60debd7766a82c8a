#!/usr/bin/env bash
# The test command behind `make test` (and `make test-fast`, which passes -m "not slow"): linters and the type
# checker, then pytest with the arguments given. pytest exits 5 when it collects nothing; `set -e` turns that (and
# any failure) into a failed run.
#
# With no arguments (`make test`, CI) the suite runs as two pytest sessions at once: the tests that run the model on
# every core (`slow`, not `without_model` nor `one_thread`) in the foreground, and beside them the rest at the lowest
# priority (scripts/dev/lowest_priority.sh). The rest then takes mostly the CPU the model tests leave idle while they
# wait on a server, a socket or a signal: llama.cpp's threads spin at every barrier, so a decode sharing its cores with
# busy work at its own priority slows down many times over (and one of several threads at the lowest priority stalls
# the others: hence only single-threaded model work goes beside). Its output goes to a log, shown in full when it
# fails, else its summary line.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"
# mypy's cache beside the other per-user caches: a fresh clone on a machine that has checked before starts warm.
export MYPY_CACHE_DIR="${MYPY_CACHE_DIR:-${SEMIF_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/semif-sagemaker}/mypy}"
ruff check .
mypy app.py stacks container/semif_adapter clients/python/semif_decision_client  # strict: pyproject.toml [tool.mypy]
if [ "$#" -gt 0 ]; then
  exec python -m pytest "$@"
fi

mkdir -p build
no_model_log="$PWD/build/tests-without-model.log"
echo "tests without the model: beside the others, at the lowest priority (log: $no_model_log)"
setsid scripts/dev/lowest_priority.sh python -m pytest -m "not slow or without_model or one_thread" \
  -p no:cacheprovider >"$no_model_log" 2>&1 &
no_model=$!
# Whatever ends this script (an error, Ctrl-C: pytest exits 2 on it, and bash runs the INT trap once it has) ends that
# session too; it is in a session of its own, so a terminal's Ctrl-C does not reach it.
stop_no_model() { kill -TERM -- "-$no_model" 2>/dev/null || true; }
trap stop_no_model EXIT
trap 'stop_no_model; exit 130' INT TERM
status=0
python -m pytest -m "slow and not without_model and not one_thread" || status=$?
no_model_status=0
wait "$no_model" || no_model_status=$?
trap - EXIT
if [ "$no_model_status" -ne 0 ]; then
  cat "$no_model_log"
  echo "tests without the model: FAILED (exit $no_model_status; log: $no_model_log)"
else
  echo "tests without the model: $(tail -n 1 "$no_model_log" | tr -d '=' | sed 's/^ *//')"
fi
[ "$status" -eq 0 ] && [ "$no_model_status" -eq 0 ]
