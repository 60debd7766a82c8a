"""Subprocess work a later test needs, begun when the session's first test starts and run at the lowest CPU priority:
in a session of its own whose scheduling group has the least weight (nice 19), under Linux's SCHED_IDLE.

How low, and why both a group of its own at nice 19 and SCHED_IDLE: scripts/dev/lowest_priority.sh.

The suite keeps its 2 cores about two-thirds busy: the model tests leave one idle while they wait on a server, a
socket or a signal. Work begun here takes only those idle moments, and when its own test comes, often minutes later,
the result is there. When it is not, the test waits for it and its processes get back the normal priority.

Only for work that writes nothing but its own output directory (made before it begins: pytest's temporary
directories are not thread-safe) and files no other test reads: no model, no server, no timing. A test module opts in
with `begin_in_background(tmp_path_factory)`, called (by tests/conftest.py) only when one of its tests is selected; its
fixture then takes the result with `take(name, run_here, timeout_s)`, which runs the work in the foreground instead
when nothing was begun.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from scripts.local.processes import descendants

_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="background")
_begun: dict[str, Future[Any]] = {}
_waited_for = threading.Event()


# A new session (so a scheduling group of its own), that group at nice 19, then SCHED_IDLE; each inherited by the
# command's children.
LOWEST_PRIORITY = ("setsid", str(Path(__file__).resolve().parents[2] / "scripts" / "dev" / "lowest_priority.sh"))


def priority() -> tuple[str, ...]:
    """The prefix of a background command line: none once a test waits."""
    return () if _waited_for.is_set() else LOWEST_PRIORITY


def begin(name: str, work: Callable[[], Any]) -> None:
    _begun[name] = _pool.submit(work)


def take(name: str, run_here: Callable[[], Any], timeout_s: float) -> Any:
    """The result of the work begun as `name` (waiting at most `timeout_s`), else `run_here()`'s."""
    begun = _begun.pop(name, None)
    if begun is None:
        return run_here()
    if not begun.done():
        _hurry()
    return begun.result(timeout=timeout_s)


def _hurry() -> None:
    """A test waits for background work: its processes get back the normal priority, so that other load on the
    machine (not ours) does not starve them. Without the right to raise a priority they stay as they are; so they do
    where the waiting session is itself at the lowest (`make test`'s tests without the model: scripts/dev/run_tests.sh),
    where raising them would set them above it, beside the model tests."""
    _waited_for.set()
    if os.sched_getscheduler(0) == os.SCHED_IDLE:
        return
    for pid in descendants(os.getpid()):
        with contextlib.suppress(OSError):
            if os.sched_getscheduler(pid) == os.SCHED_IDLE:
                os.sched_setscheduler(pid, os.SCHED_OTHER, os.sched_param(0))
                Path(f"/proc/{pid}/autogroup").write_text("0")


def shutdown() -> None:
    """At the session's end: work no test took and that has not begun is dropped (work running ends at its own
    timeout)."""
    for begun in _begun.values():
        begun.cancel()
    _pool.shutdown(wait=False, cancel_futures=True)
