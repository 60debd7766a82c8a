"""Owns the model and the one worker thread that may touch it; admits requests boundedly.

llama.cpp contexts are not thread-safe, and on a CPU one decode already uses
every core, so decisions run one at a time on a single worker (llama.cpp
releases the GIL, so the event loop keeps answering `/ping`). Requests beyond
`queue_size` are refused at once with 503 + Retry-After instead of timing out.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from .kv_engine import DecisionEngine, DecodeAbortedError
from .llama_runtime import LlamaRuntime
from .prompt import ChatFrame, build_plan
from .request_schema import Debias, Decision, DecisionRequest, Option
from .response import ModelIdentity, Timing, render
from .scoring import score_options
from .settings import Settings

LOG = logging.getLogger("semif_adapter")
WARMUP_REQUEST = DecisionRequest(
    decision=Decision(id="warm-up", state="The adapter is starting.", question="Is it ready?",
                      options=[Option(id="yes", description="Yes."), Option(id="no", description="No.")]),
    debias=Debias.NONE,
)


class QueueFullError(Exception):
    """The bounded queue is full."""


class NotReadyError(Exception):
    """The model is not loaded and warmed up yet."""


class ShuttingDownError(Exception):
    """SIGTERM arrived: no new work, and queued work that cannot finish in time is handed back."""


@dataclass(frozen=True)
class Decided:
    body: bytes
    prompt_tokens: int
    cached_tokens: int


class DecisionService:
    def __init__(self, settings: Settings, model_path: Path) -> None:
        self.settings = settings
        self.model_path = model_path
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="llama-worker")
        self._admitted = 0
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._draining = False
        self._pending: set[Future[Decided]] = set()
        self._runtime: LlamaRuntime | None = None
        self._engine: DecisionEngine | None = None
        self._frame: ChatFrame | None = None
        self._identity: ModelIdentity | None = None

    @property
    def ready(self) -> bool:
        return self._ready.is_set()

    def load(self) -> Future[None]:
        """Load and warm up on the worker thread; the future fails if the model cannot serve."""
        return self._executor.submit(self._load)

    def _load(self) -> None:
        started = time.perf_counter()
        runtime = LlamaRuntime(self.model_path, self.settings)
        self._runtime = runtime
        self._frame = runtime.chat_frame(self.settings.chat_template)
        self._engine = DecisionEngine(runtime, self._frame, runtime.slot_tokens(self._frame))
        self._identity = ModelIdentity.of(self.model_path, runtime.facts, self.settings.model_sha256)
        warm = self._decide(WARMUP_REQUEST, time.perf_counter())  # /ping must not say 200 before this works
        LOG.info("ready", extra={"fields": {
            "model": self._identity.document, "load_ms": round((time.perf_counter() - started) * 1000, 1),
            "head_tokens": self._engine.head_tokens, "warmup_prompt_tokens": warm.prompt_tokens,
            "threads": self.settings.threads, "queue_size": self.settings.queue_size}})
        self._ready.set()  # after the line: whoever sees /ping 200 finds "ready" in the log

    async def decide(self, request: DecisionRequest) -> Decided:
        if self._draining:
            raise ShuttingDownError
        if not self.ready:
            raise NotReadyError
        with self._lock:
            if self._admitted >= self.settings.queue_size:
                raise QueueFullError
            self._admitted += 1
            job = self._executor.submit(self._decide, request, time.perf_counter())
            self._pending.add(job)
        job.add_done_callback(self._release)  # the slot frees when the work ends, not when a client leaves
        try:
            return await asyncio.wrap_future(job)
        except DecodeAbortedError:
            raise ShuttingDownError from None
        except asyncio.CancelledError:
            if job.cancelled() and self._draining:  # handed back by drain(), not a client going away
                raise ShuttingDownError from None
            raise
        finally:
            # The job holds its exception, whose traceback holds this frame: a cycle that kept a refused
            # request's input (up to 6 MB, far more as tokens) in memory until the cyclic GC happened to run.
            del job

    def _release(self, job: Future[Decided]) -> None:
        with self._lock:
            self._admitted -= 1
            self._pending.discard(job)

    def stop_admitting(self) -> None:
        """Refuse new decisions from now on; safe to call from a signal handler (it only sets a flag)."""
        self._draining = True

    def drain(self) -> None:
        """Refuse new work now; at the drain deadline, hand back whatever is still admitted.

        Admitted decisions keep running one by one, so a short queue drains completely. At the
        deadline, work not yet started and the decode still running end with a JSON 503 each
        (retryable elsewhere) instead of a socket cut by the server's hard stop.
        """
        self.stop_admitting()
        asyncio.get_running_loop().call_later(self.settings.drain_seconds, self._hand_back)

    def _hand_back(self) -> None:
        with self._lock:
            pending = list(self._pending)
        for job in pending:
            job.cancel()  # succeeds for work that has not started
        if pending and self._runtime is not None:
            self._runtime.request_abort()

    def _decide(self, request: DecisionRequest, admitted_at: float) -> Decided:
        assert self._engine is not None and self._frame is not None
        started = time.perf_counter()
        plan = build_plan(self._frame, request)
        result = self._engine.score(plan)
        scores = score_options(plan, result.branches, request.temperature)
        identity = self._identity
        assert identity is not None
        timing = Timing(queue_ms=(started - admitted_at) * 1000,
                        total_ms=(time.perf_counter() - admitted_at) * 1000)
        body = render(request, plan=plan, result=result, scores=scores, model=identity, timing=timing)
        return Decided(body=body, prompt_tokens=result.prompt_tokens, cached_tokens=result.cached_tokens)

    def close(self) -> None:
        """Finish the running decision, then free the native objects."""
        self._ready.clear()
        self._executor.shutdown(wait=True, cancel_futures=True)
        if self._engine is not None:
            self._engine.close()
        if self._runtime is not None:
            self._runtime.close()
