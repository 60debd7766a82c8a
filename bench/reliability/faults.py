"""Faults around the adapter process: broken model files at start-up, and SIGTERM in the middle of load.

A broken model must stop the process with one clear `startup failed` line and a
non-zero exit, and `/ping` must never have said 200. SIGTERM under load must let
every admitted request finish, refuse what comes after, and exit 0 within
SageMaker's 30 s.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scripts.local.processes import http_status
from semif_adapter.engine.embedded_model import embedded_model_path

from .load import Clients, LoadConfig, Outcome
from .servers import STOP_TIMEOUT_S, Server, start_decision

FAULT_TIMEOUT_S = 90.0  # a broken model must be refused well within this, even on a busy machine
TRUNCATED_BYTES = 4 * 1024 * 1024  # header intact, tensor data cut off
RACE_S = 0.25  # a request sent this close before SIGTERM may be served or refused: both are right
RACE_AFTER_S = 0.05  # ... and this close after it: the signal is not handled at the instant it is sent
REFUSALS = frozenset({"ConnectError", "RemoteProtocolError", "ReadError"})  # a closed door, not a lost answer


@dataclass(frozen=True)
class Fault:
    name: str
    env: dict[str, str]
    how: str  # what was done to the model, for the report


def make_fault(name: str, root: Path) -> Fault:
    """Lay out one broken model under `root`; the environment that points the adapter at it."""
    model = embedded_model_path()
    root.mkdir(parents=True, exist_ok=True)
    target = root / "model.gguf"
    by_dir = {"SM_LLAMA_CPP_MODEL": "", "SM_MODEL_DIR": str(root)}
    if name == "missing":
        return Fault(name, {"SM_LLAMA_CPP_MODEL": str(root / "gone.gguf")}, "SM_LLAMA_CPP_MODEL names no file")
    if name == "truncated":
        with model.open("rb") as source:
            target.write_bytes(source.read(TRUNCATED_BYTES))
        return Fault(name, by_dir, f"first {TRUNCATED_BYTES} bytes of the model")
    if name == "two_models":
        for other in ("a.gguf", "b.gguf"):
            (root / other).symlink_to(model)
        return Fault(name, by_dir, "a.gguf and b.gguf in the model directory")
    if name == "wrong_magic":
        target.write_bytes(b"\x00" * 1024)
        return Fault(name, by_dir, "1 KiB of zeros named model.gguf")
    if name == "unreadable":
        return _unreadable(target, by_dir)
    raise ValueError(f"unknown fault {name!r}")


def _unreadable(target: Path, env: dict[str, str]) -> Fault:
    """A model file that exists but cannot be read.

    As a normal user, mode 000 does it. Root ignores permissions (tests run as root here), so
    then the file is a link to /proc/self/mem: a regular file that every reader, root included,
    gets EIO from at offset 0, the same error a failing disk gives.
    """
    if os.geteuid() != 0:
        shutil.copyfile(embedded_model_path(), target)
        target.chmod(0)
        return Fault("unreadable", env, "a copy of the model with mode 000")
    target.symlink_to("/proc/self/mem")
    return Fault("unreadable", env, "running as root (mode 000 would not stop reads): model.gguf -> "
                                    "/proc/self/mem, which fails every read with EIO")


def run_fault(fault: Fault, log_dir: Path) -> dict[str, Any]:
    """Start the adapter on the broken model; watch /ping until the process exits."""
    server = start_decision(log_dir, fault.env, name=f"fault-{fault.name}", wait=False)
    started = time.monotonic()
    pings_ok = pings = 0
    while server.alive() and time.monotonic() - started < FAULT_TIMEOUT_S:
        pings += 1
        pings_ok += http_status(f"{server.url}/ping") == 200
        time.sleep(0.02)
    hung = server.alive()
    seconds = time.monotonic() - started
    stopped = server.stop(signal.SIGKILL) if hung else server.stop()
    failures = [line.get("event", "") for line in server.log_lines() if "startup failed" in line.get("event", "")]
    problems = []
    if hung:
        problems.append(f"still running after {FAULT_TIMEOUT_S:.0f} s")
    elif stopped.status == 0:
        problems.append("exited 0")
    if pings_ok:
        problems.append(f"/ping said 200 {pings_ok} times")
    if len(failures) != 1:
        problems.append(f"{len(failures)} 'startup failed' log lines, not one")
    return {"fault": fault.name, "how": fault.how, "exit_status": stopped.status, "seconds": round(seconds, 2),
            "pings_answered": pings, "pings_200": pings_ok, "message": failures[0] if failures else None,
            "problems": [f"{fault.name}: {p}" for p in problems]}


def classify(outcome: Outcome, signalled_s: float) -> tuple[str, str | None]:
    """(kind, problem) of one outcome of a load interrupted by SIGTERM at `signalled_s`."""
    served = outcome.status == 200 and outcome.answer_problem is None
    refused = outcome.error in REFUSALS or (outcome.status == 503 and outcome.code == "shutting_down")
    if outcome.sent_s < signalled_s - RACE_S:
        kind = "in flight, finished" if served and outcome.answered_s > signalled_s else \
            "before, finished" if served else "before, not served"
        return kind, None if served else f"sent before SIGTERM, got {outcome.status or outcome.error}"
    if outcome.sent_s > signalled_s + RACE_AFTER_S:
        return ("after, refused", None) if refused else \
            ("after, not refused", f"sent after SIGTERM, got {outcome.status or outcome.error}")
    return ("at the signal, " + ("served" if served else "refused" if refused else "lost"),
            None if served or refused else f"sent as SIGTERM arrived, got {outcome.status or outcome.error}")


def sigterm_under_load(log_dir: Path, clients: int, signal_after_s: float) -> dict[str, Any]:
    """Load a fresh adapter, SIGTERM it mid-load; every client then sends one more request and stops."""
    server: Server = start_decision(log_dir, name="sigterm")
    load = Clients(server.url, LoadConfig(clients=clients, duration_s=signal_after_s + STOP_TIMEOUT_S + 30))
    threads = load.threads()
    for thread in threads:
        thread.start()
    time.sleep(signal_after_s)
    signalled = load.now()
    load.last_round.set()
    server.process.send_signal(signal.SIGTERM)
    try:
        status = server.process.wait(STOP_TIMEOUT_S + 10)
    except subprocess.TimeoutExpired:
        status = None
    exit_s = load.now() - signalled
    for thread in threads:
        thread.join(load.config.request_timeout_s + 5)
    stopped = server.stop()
    kinds: dict[str, int] = {}
    problems = []
    for outcome in load.outcomes:
        kind, problem = classify(outcome, signalled)
        kinds[kind] = kinds.get(kind, 0) + 1
        if problem:
            problems.append(problem)
    if status != 0:
        problems.append(f"exit status {stopped.status if status is None else status}, not 0")
    if exit_s > STOP_TIMEOUT_S:
        problems.append(f"exited {exit_s:.1f} s after SIGTERM (SageMaker kills at {STOP_TIMEOUT_S:.0f} s)")
    if not kinds.get("in flight, finished"):
        problems.append("no request was in flight at SIGTERM: the drain was not exercised")
    if not kinds.get("after, refused"):
        problems.append("no request after SIGTERM was seen refused")
    return {"clients": clients, "signal_after_s": signal_after_s, "sent": len(load.outcomes),
            "outcomes": dict(sorted(kinds.items())), "exit_status": status, "exit_s": round(exit_s, 2),
            "survivors": list(stopped.survivors), "problems": problems}
