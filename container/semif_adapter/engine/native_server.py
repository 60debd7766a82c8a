"""llama.cpp's own `llama-server`, run beside the adapter to score a decision-typed GGUF with the model's own head.

The server is a child process bound to 127.0.0.1 on a free port: only the adapter reaches it, and only its
`/v1/systemone`, `/health`, `/tokenize`, `/detokenize` and the erase action of `/slots/N` are ever called, so none of
its routes (`/completion`, `/props`, `/metrics`, the web UI) is reachable from the endpoint. It dies with the
adapter (PR_SET_PDEATHSIG), and a watchdog restarts it when it exits or stops answering `/health`; while it is down
`ready` is false (so `/ping` is 503 and requests get a clear 503). Too many restarts in a row mean the instance itself
is sick: `failed` is set and the adapter exits, so SageMaker replaces the instance rather than keep routing to one that
cannot answer.

Every request is asked of a server whose slots hold nothing (`ask_fresh`): llama-server continues a new prompt from
whatever its slot still holds, and a decode split at another place gives other floats (0.2811 fresh, 0.3337 after
the same request, on one openjev choice). Clearing the slots first, one request at a time, makes an answer a
function of the request alone: the numbers a fresh llama-server with the same arguments gives to it as its first.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import http.client
import json
import logging
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .llama_runtime import RuntimeStartError

LOG = logging.getLogger("semif_adapter")
SERVER_BINARY = "llama-server"
LOOPBACK = "127.0.0.1"
PR_SET_PDEATHSIG = 1
START_TIMEOUT_SECONDS = 600.0  # SageMaker's own container start-up health check allows this much at most
HEALTH_PERIOD_SECONDS = 2.0
HEALTH_TIMEOUT_SECONDS = 5.0
HEALTH_FAILURES_TO_RESTART = 3  # about 20 s without an answer to /health: hung, not busy (it answers while decoding)
RESTARTS_BEFORE_GIVING_UP = 3  # in a row, each failing to come up: the instance must be replaced
STOP_SECONDS = 5.0
KEPT_LOG_LINES = 40


class NativeUnavailableError(RuntimeError):
    """The native server did not answer (it exited, hung or is restarting)."""


@dataclass(frozen=True)
class NativeReply:
    status: int
    document: Any  # the parsed JSON body, or None where it was not JSON
    elapsed_ms: float


@dataclass
class NativeServerOptions:
    """How llama-server is started: the model, its slots and context, and the same llama.cpp settings as the
    adapter's own engine (`SM_LLAMA_CPP_*`)."""

    model: Path
    slots: int
    context_per_slot: int
    threads: int
    threads_batch: int
    batch_size: int
    ubatch_size: int | None = None
    n_gpu_layers: int | None = None
    flash_attn: str | None = None  # on / off / auto
    binary: str | None = None
    extra: list[str] = field(default_factory=list)

    def arguments(self, port: int, slot_dir: str) -> list[str]:
        binary = self.binary or shutil.which(SERVER_BINARY)
        if not binary:
            raise RuntimeStartError(f"{SERVER_BINARY} was not found on PATH: the native decision engine needs the "
                                    "pinned llama.cpp build (make bootstrap; in the image, /opt/semif/bin)")
        arguments = [binary, "--model", str(self.model), "--host", LOOPBACK, "--port", str(port),
                     "--parallel", str(self.slots), "--ctx-size", str(self.context_per_slot * self.slots),
                     "--threads", str(self.threads), "--threads-batch", str(self.threads_batch),
                     "--batch-size", str(self.batch_size), "--no-webui", "--no-slots",
                     "--slot-save-path", slot_dir]  # what turns on the erase action; nothing is ever saved there
        if self.ubatch_size:
            arguments += ["--ubatch-size", str(self.ubatch_size)]
        if self.n_gpu_layers is not None:
            arguments += ["--n-gpu-layers", str(self.n_gpu_layers)]
        if self.flash_attn:
            arguments += ["--flash-attn", self.flash_attn]
        return arguments + self.extra


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((LOOPBACK, 0))
        port: int = probe.getsockname()[1]
        return port


def _die_with_parent() -> None:
    """In the child before exec: the kernel kills it when the adapter dies, even by SIGKILL."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


class NativeServer:
    """One llama-server child: started, watched, restarted, stopped."""

    def __init__(self, options: NativeServerOptions, on_failed: Callable[[str], None] | None = None) -> None:
        self.options = options
        self._on_failed = on_failed
        self._process: subprocess.Popen[bytes] | None = None
        self._port = 0
        self._ready = threading.Event()
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._lines: collections.deque[str] = collections.deque(maxlen=KEPT_LOG_LINES)
        self._watchdog: threading.Thread | None = None
        self._one_request = threading.Lock()  # ask_fresh: a request alone on cleared slots
        self._slot_dir = tempfile.TemporaryDirectory(prefix="semif-native-slots-")
        self.arguments: list[str] = []  # the running server's command line (logged: a peer can be started alike)
        self.restarts = 0
        self.failed: str | None = None
        self.started_ms = 0.0  # the last start, from spawn to /health 200

    @property
    def ready(self) -> bool:
        return self._ready.is_set()

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    # -- life cycle -------------------------------------------------------------------------------------------------
    def start(self, timeout: float = START_TIMEOUT_SECONDS) -> None:
        """Start and wait until it answers; raises RuntimeStartError with its last log lines if it cannot."""
        self._spawn_and_wait(timeout)
        self._watchdog = threading.Thread(target=self._watch, name="native-watchdog", daemon=True)
        self._watchdog.start()

    def _spawn_and_wait(self, timeout: float) -> None:
        started = time.perf_counter()
        with self._lock:
            self._port = free_port()
            self._lines.clear()
            self.arguments = self.options.arguments(self._port, self._slot_dir.name)
            self._process = subprocess.Popen(self.arguments, stdin=subprocess.DEVNULL,
                                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                             preexec_fn=_die_with_parent)  # noqa: PLW1509 (only prctl)
            process = self._process
        threading.Thread(target=self._keep_lines, args=(process,), name="native-log", daemon=True).start()
        deadline = started + timeout
        while time.perf_counter() < deadline and not self._stopping.is_set():
            if process.poll() is not None:
                raise RuntimeStartError(f"llama-server exited with {process.returncode} while starting: "
                                        + self.last_lines())
            if self._health(1.0) == 200:
                self.started_ms = (time.perf_counter() - started) * 1000
                self._ready.set()
                LOG.info("native decision server ready", extra={"fields": {
                    "pid": process.pid, "port": self._port, "start_ms": round(self.started_ms, 1),
                    "arguments": self.arguments}})
                return
            time.sleep(0.05)
        self._kill(process)
        raise RuntimeStartError(f"llama-server did not become healthy within {timeout:g} s: " + self.last_lines())

    def _keep_lines(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stdout is not None
        for raw in process.stdout:
            self._lines.append(raw.decode("utf-8", errors="replace").rstrip())

    def last_lines(self) -> str:
        return " | ".join(list(self._lines)[-8:]) or "(no output)"

    def _watch(self) -> None:
        """Restart on exit or on a hang; give up after RESTARTS_BEFORE_GIVING_UP failed starts in a row."""
        failures = 0
        while not self._stopping.is_set():
            process = self._process
            assert process is not None
            exited = process.poll() is not None
            if not exited:
                failures = failures + 1 if self._health(HEALTH_TIMEOUT_SECONDS) != 200 else 0
                if failures < HEALTH_FAILURES_TO_RESTART:
                    self._stopping.wait(HEALTH_PERIOD_SECONDS)
                    continue
            if self._stopping.is_set():
                return
            self._ready.clear()
            reason = f"exited with {process.returncode}" if exited else "stopped answering /health"
            LOG.error("native decision server %s; restarting", reason,
                      extra={"fields": {"pid": process.pid, "last_lines": self.last_lines()}})
            self._kill(process, hung=not exited)
            failures = 0
            if not self._restart():
                return

    def _restart(self) -> bool:
        for attempt in range(1, RESTARTS_BEFORE_GIVING_UP + 1):
            if self._stopping.is_set():
                return False
            try:
                self._spawn_and_wait(START_TIMEOUT_SECONDS)
                self.restarts += 1
                return True
            except RuntimeStartError as error:
                LOG.error("native decision server restart %d failed: %s", attempt, error)
        self.failed = f"llama-server could not be restarted ({RESTARTS_BEFORE_GIVING_UP} attempts): " \
                      + self.last_lines()
        if self._on_failed is not None:
            self._on_failed(self.failed)
        return False

    def stop(self) -> None:
        """Nothing is left running: SIGTERM, then SIGKILL after STOP_SECONDS."""
        self._stopping.set()
        self._ready.clear()
        with self._lock:
            process = self._process
        if process is not None:
            self._kill(process)
        if self._watchdog is not None and self._watchdog is not threading.current_thread():
            self._watchdog.join(HEALTH_TIMEOUT_SECONDS + 1)
        self._slot_dir.cleanup()

    @staticmethod
    def _kill(process: subprocess.Popen[bytes], *, hung: bool = False) -> None:
        """SIGTERM, then SIGKILL after STOP_SECONDS; a hung server at once (its SIGTERM handler would not run)."""
        if process.poll() is None:
            if not hung:
                process.terminate()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(STOP_SECONDS)
            if process.poll() is None:
                process.kill()
                process.wait()

    # -- calls ----------------------------------------------------------------------------------------------------
    def _health(self, timeout: float) -> int:
        try:
            return self.call("GET", "/health", None, timeout).status
        except NativeUnavailableError:
            return 0

    def ask_fresh(self, path: str, body: Any, timeout: float) -> NativeReply:
        """POST `body` to a server whose every slot was just erased, with no other request between the two."""
        with self._one_request:
            for slot in range(self.options.slots):
                erased = self.call("POST", f"/slots/{slot}?action=erase", {}, timeout)
                if erased.status != 200:
                    raise NativeUnavailableError(f"llama-server did not erase slot {slot}: {erased.status} "
                                                 f"{erased.document}")
            return self.call("POST", path, body, timeout)

    def call(self, method: str, path: str, body: Any, timeout: float) -> NativeReply:
        """One request; NativeUnavailableError if the server cannot be reached or drops the connection."""
        started = time.perf_counter()
        connection = http.client.HTTPConnection(LOOPBACK, self._port, timeout=timeout)
        try:
            payload = None if body is None else json.dumps(body, ensure_ascii=False).encode()
            headers = {"Content-Type": "application/json"} if payload is not None else {}
            connection.request(method, path, body=payload, headers=headers)
            response = connection.getresponse()
            raw = response.read()
        except (OSError, http.client.HTTPException) as error:
            raise NativeUnavailableError(f"llama-server did not answer {path}: {error}") from error
        finally:
            connection.close()
        try:
            document = json.loads(raw) if raw else None
        except ValueError:
            document = None
        return NativeReply(response.status, document, (time.perf_counter() - started) * 1000)
