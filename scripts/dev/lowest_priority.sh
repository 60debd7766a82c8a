#!/usr/bin/env bash
# lowest_priority.sh COMMAND...: run COMMAND (and what it starts) at the least CPU priority Linux gives without root:
# its session's scheduling group at nice 19, then SCHED_IDLE. Call it as `setsid scripts/dev/lowest_priority.sh ...`,
# so that the group is a new one (each session is one, `autogroup`) and only COMMAND's.
#
# Both halves matter. Linux shares the CPU between scheduling groups first and orders tasks by their policy only
# inside a group, and every server a test starts is a session of its own: SCHED_IDLE work left in pytest's session
# took half the CPU from them (an adapter's start 2.3 s alone, 21-45 s beside two SCHED_IDLE busy loops in another
# session). A group at nice 19 alone still nearly doubles a decode's time (an engine-cache test 14 s alone, 26-27 s
# beside the tests that need no model so placed); with SCHED_IDLE too, 19-20 s (measured 2026-12-05). Where
# autogroup is off, SCHED_IDLE alone does it.
echo 19 2>/dev/null >/proc/self/autogroup || true
exec chrt --idle 0 "$@"
