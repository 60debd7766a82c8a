# shellcheck shell=bash
# The bootstrap's progress, sourced by scripts/dev/bootstrap.sh (and by tests/dev/test_bootstrap_progress.py).
# Each step prints one line when it starts and one when it ends, with its time, or one line saying it is up to date.
# A step's command writes its whole output to the step's log, $LOG_DIR/SLUG.log, named on the start line; while it
# runs, one line shows its progress (a CMake build's last `[ NN%]`, else the log's last line): rewritten in place
# when stdout is a terminal, printed at most once every $PROGRESS_EVERY seconds (60) when it is not (CI). A failing
# command prints the end of its log and a line naming the step, and ends the bootstrap with its exit status.
# The caller sets LOG_DIR and STEPS (how many steps it runs), then for each step: `step SLUG TITLE`, then either
# `up_to_date` or `run_logged COMMAND...`.

PROGRESS_EVERY="${PROGRESS_EVERY:-60}"
FAILED_LOG_LINES=200  # what a failed step prints of its log; the path to the whole file follows

say() { printf 'bootstrap: %s\n' "$*"; }

# step SLUG TITLE: begin the next of the STEPS steps, logging to $LOG_DIR/SLUG.log; called in the main shell, where the
# count lives (a subshell may then run the step). STEP_NOTE, empty until set, adds a few words to the start line of
# a step that runs (how long it takes, what it installs).
step() {
  STEP_NO=$((${STEP_NO:-0} + 1))
  STEP_TITLE="[$STEP_NO/$STEPS] $2"
  STEP_LOG="$LOG_DIR/$1.log"
  STEP_NOTE=""
}

# up_to_date: the one line of a step whose inputs are unchanged.
up_to_date() { say "$STEP_TITLE: up to date"; }

# progress_of LOG: how far a running step is: "NN%" from the last `[ NN%]` line of a CMake build among the log's
# last 20 lines (compiler warnings come between them), else the log's last non-blank line, unindented; printable
# ASCII only.
progress_of() {
  local lines percent
  lines=$(tail -n 20 "$1" 2>/dev/null | tr '\r' '\n' | LC_ALL=C tr -cd '\n\040-\176') || true
  percent=$(grep -oE '^\[ *[0-9]+%\]' <<< "$lines" | tail -n 1 | tr -dc '0-9') || true
  if [ -n "$percent" ]; then
    echo "$percent%"
  else
    grep -v '^ *$' <<< "$lines" | tail -n 1 | sed 's/^ *//' || true
  fi
}

# run_logged [--quiet] COMMAND...: run the current step's COMMAND with all its output in the step's log, between the
# step's start and end lines and under its progress line. COMMAND may be a shell function: it stops at its first
# failing command, as under `set -e`. --quiet: no start, progress or end line (for a quick command of a step that
# reports itself up to date); a failure is reported all the same. Never call it as a condition (`if run_logged`,
# `run_logged ... ||`): bash ignores `set -e` in all that a condition runs.
run_logged() {
  local quiet=0 started=$SECONDS rc errexit=0 ticker="" total
  if [ "$1" = --quiet ]; then quiet=1; shift; fi
  mkdir -p "$(dirname "$STEP_LOG")"
  : > "$STEP_LOG"
  if [ "$quiet" = 0 ]; then
    say "$STEP_TITLE (${STEP_NOTE:+$STEP_NOTE; }log: $STEP_LOG) ..."
    _show_progress "$BASHPID" "$started" &
    ticker=$!
  fi
  case $- in *e*) errexit=1 ;; esac
  set +e
  (set -e; "$@") > "$STEP_LOG" 2>&1 < /dev/null
  rc=$?
  if [ "$errexit" = 1 ]; then set -e; fi
  if [ -n "$ticker" ]; then
    kill "$ticker" 2> /dev/null || true
    wait "$ticker" 2> /dev/null || true
    if [ -t 1 ]; then printf '\r\033[K'; fi
  fi
  if [ "$rc" -ne 0 ]; then
    {
      total=$(wc -l < "$STEP_LOG")
      if [ "$total" -gt "$FAILED_LOG_LINES" ]; then
        say "$STEP_TITLE: the last $FAILED_LOG_LINES of the $total lines of its log:"
      else
        say "$STEP_TITLE: its log:"
      fi
      tail -n "$FAILED_LOG_LINES" "$STEP_LOG"
      say "$STEP_TITLE: FAILED (exit $rc) after $((SECONDS - started)) s; the whole log: $STEP_LOG"
    } >&2
    exit "$rc"
  fi
  if [ "$quiet" = 0 ]; then say "$STEP_TITLE: done in $((SECONDS - started)) s"; fi
}

# _show_progress PARENT STARTED: run_logged's progress line, in the background, until TERM or until PARENT (the shell
# running the step) is gone.
_show_progress() {
  set +e
  local parent=$1 started=$2 nap="" shown=$SECONDS cols size line
  trap 'if [ -n "$nap" ]; then kill "$nap" 2> /dev/null; fi; exit 0' TERM
  { size=$(stty size <&3 2> /dev/null); } 3>&1  # the terminal's width, where stdout is one: a longer line would wrap
  cols=${size#* }
  [[ $cols =~ ^[0-9]+$ ]] && [ "$cols" -ge 20 ] || cols=80  # a pseudo-terminal may say 0
  while kill -0 "$parent" 2> /dev/null; do
    sleep 1 &
    nap=$!
    wait "$nap"
    if [ -t 1 ]; then
      line="bootstrap: $STEP_TITLE: $(progress_of "$STEP_LOG") ($((SECONDS - started)) s)"
      printf '\r\033[K%s' "${line:0:cols-1}"
    elif [ $((SECONDS - shown)) -ge "$PROGRESS_EVERY" ]; then
      shown=$SECONDS
      line=$(progress_of "$STEP_LOG")
      say "$STEP_TITLE: running for $((SECONDS - started)) s${line:+: ${line:0:100}}"
    fi
  done
}
