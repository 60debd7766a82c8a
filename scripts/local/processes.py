"""Child processes that never outlive their parent, and bounded waits on them.

Every local server is a child started here: bound to loopback on a free port,
its output in a log file, in its own session (so a terminal's Ctrl-C reaches
the parent only, which then stops children in order), and with the kernel
asked to SIGTERM it if the parent dies without cleaning up (PR_SET_PDEATHSIG),
so even a SIGKILLed parent leaves no llama-server behind. (The kernel ties that signal to the
*thread* that forked, so children are started from the main thread, before any server thread runs.)
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import os
import signal
import socket
import ssl
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import httpx

LOOPBACK = "127.0.0.1"
PR_SET_PDEATHSIG = 1
STOP_TIMEOUT_S = 15.0  # SageMaker gives containers 30 s between SIGTERM and SIGKILL; locally less is plenty
POLL_INTERVAL_S = 0.1


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def _terminate_with_parent() -> None:
    """Runs in the child before exec: die with the parent (Linux; a no-op elsewhere)."""
    parent = os.getppid()
    libc_name = ctypes.util.find_library("c")
    if libc_name is None:
        return
    libc = ctypes.CDLL(libc_name, use_errno=True)
    if hasattr(libc, "prctl"):
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


class ChildError(RuntimeError):
    """A child exited or never became ready; the message names it and quotes its log."""


@dataclass
class Child:
    """One started server process and where its output goes."""

    name: str
    process: subprocess.Popen[bytes]
    log_path: Path | None  # None: the output goes to ours
    _log: IO[bytes] | None = field(repr=False, default=None)

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def log_tail(self, lines: int = 20) -> str:
        if self.log_path is None:
            return ""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def failure(self, what: str) -> ChildError:
        tail = self.log_tail()
        where = f" (log: {self.log_path})" if self.log_path else ""
        return ChildError(f"{self.name}: {what}{where}" + (f"\n{tail}" if tail else ""))

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM, wait at most `timeout_s`, then SIGKILL; returns the exit status."""
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    self.process.kill()
                self.process.wait(timeout=timeout_s)
        if self._log is not None:
            self._log.close()
            self._log = None
        return int(self.process.returncode)


def start_child(name: str, argv: Sequence[str], env: Mapping[str, str], log_path: Path | None = None,
                cwd: Path | None = None) -> Child:
    """Start `argv` as a child that dies with us, its stdout and stderr in `log_path` (or ours)."""
    log: IO[bytes] | None = None
    if log_path is not None:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log = log_path.open("ab")
    try:
        process = subprocess.Popen(
            list(argv), env=dict(env), cwd=cwd, stdin=subprocess.DEVNULL,
            stdout=log, stderr=subprocess.STDOUT if log else None,
            start_new_session=True, preexec_fn=_terminate_with_parent,  # noqa: PLW1509 (started before threads)
        )
    except OSError as error:
        if log is not None:
            log.close()
        raise ChildError(f"{name}: cannot start {argv[0]}: {error}") from error
    return Child(name=name, process=process, log_path=log_path, _log=log)


def wait_until(check: Callable[[], bool], *, timeout_s: float, what: str,
               alive: Callable[[], bool] = lambda: True, interval_s: float = POLL_INTERVAL_S) -> float:
    """Poll `check` until true; returns seconds waited. Bounded by time and by `alive()`."""
    start = time.monotonic()
    deadline = start + timeout_s
    while True:
        if check():
            return time.monotonic() - start
        if not alive():
            raise ChildError(f"{what}: the process exited while waiting")
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{what}: not ready after {timeout_s:.0f} s")
        time.sleep(interval_s)


@functools.cache
def _tls() -> ssl.SSLContext:
    """One TLS context for every probe: httpx would load certifi's CA bundle for each (about 20 ms of CPU, 60 under
    load), and a start-up is polled ten times a second on the same cores the server is starting on."""
    return httpx.create_ssl_context()


def http_status(url: str, timeout_s: float = 2.0) -> int | None:
    """GET `url`; the status code, or None when nothing answers."""
    try:
        return httpx.get(url, timeout=timeout_s, verify=_tls()).status_code
    except httpx.HTTPError:
        return None


def wait_for_ping(child: Child, url: str, timeout_s: float) -> float:
    """Wait until `url` answers 200 while `child` runs; raise naming the child otherwise."""
    try:
        return wait_until(lambda: http_status(url) == 200, timeout_s=timeout_s,
                          what=f"{child.name} {url}", alive=child.alive)
    except ChildError as error:
        raise child.failure(f"exited with status {child.process.returncode} before {url} answered 200") \
            from error
    except TimeoutError as error:
        raise child.failure(str(error)) from error


def descendants(pid: int) -> set[int]:
    """All live descendants of `pid`, read from /proc (Linux): to prove nothing is left behind."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found: set[int] = set()
    pending = [pid]
    while pending:
        for child in children.get(pending.pop(), []):
            if child not in found:
                found.add(child)
                pending.append(child)
    return found


def pid_alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def survivors(pids: Iterable[int], timeout_s: float = 5.0) -> set[int]:
    """Those of `pids` still alive after waiting up to `timeout_s` for all to exit (after a stop)."""
    family = set(pids)
    with contextlib.suppress(TimeoutError):
        wait_until(lambda: not any(pid_alive(p) for p in family), timeout_s=timeout_s, what="children")
    return {p for p in family if pid_alive(p)}
