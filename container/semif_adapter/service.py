"""Owns the model and the decision workers, one context each; admits work boundedly, batches included.

llama.cpp contexts are not thread-safe, so each decision worker owns a context of its own on the one model
(`SEMIF_WORKERS`, 2 on a CPU): two decisions at once on one thread each outrun one decision at a time on both
cores, and a lone decision still gets every core (`core_share`). The workers share the host prefix cache, the
result cache and pmi's baselines; a decision's numbers do not depend on which worker ran it, nor on what ran
beside it (llama.cpp releases the GIL, so the event loop keeps answering `/ping`). Admission
counts decisions, not requests: a batch of N lines takes N places of `queue_size` (a batch larger than the whole
queue is admitted only when nothing else is), and beyond that work is refused at once with 503 + Retry-After
instead of timing out. A batch runs in an order that maximises prefix reuse (grouped by state, then criterion);
its answers are returned in input order, each exactly what the decision alone would have been given.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from .integrity import digest
from .kv_engine import DecisionEngine, DecodeAbortedError, worker_engines
from .llama_runtime import LlamaRuntime
from .methods import Letters, Likelihood, Method, MethodScores, Pmi, Work
from .prefix_cache import PrefixCache, default_budget
from .prompt import ANSWERS_SYSTEM_TEXT, LETTERS_SYSTEM_TEXT, canonical_state
from .request_schema import Decision, DecisionRequest, Option, RequestError, Scoring
from .response import ModelIdentity, Timing, render
from .result_cache import ResultCache, result_key
from .scoring import score
from .settings import Settings
from .tokens import PromptTokenizer, PromptTooLongError, check_exact

LOG = logging.getLogger("semif_adapter")
WARMUP_DECISION = Decision(id="warm-up", state="The adapter is starting.", question="Is it ready?",
                           options=[Option(id="yes", description="Yes."), Option(id="no", description="No.")])
# Probe states for the start-up tokenization check: edges where a tokenizer's pre-split could merge across a cut.
EXACTNESS_PROBES: tuple[object, ...] = (
    "The adapter is starting.", " leading and trailing spaces ", "ends with digits 2024", "\"quoted\", and a comma,",
    "line one\nline two\n", "ünïcödé, emoji 🙂 and CJK 漢字", {"ticket": 42, "text": "JSON state"}, ["a", 1, None],
)


class QueueFullError(Exception):
    """The bounded queue is full."""


class NotReadyError(Exception):
    """The model is not loaded and warmed up yet."""


class ShuttingDownError(Exception):
    """SIGTERM arrived: no new work, and queued work that cannot finish in time is handed back."""


@dataclass(frozen=True)
class Decided:
    """One answer and the facts the access log and the metrics report about it."""

    body: bytes
    method: str
    prompt_tokens: int
    evaluated_tokens: int
    cached_tokens: int
    cache_source: str
    queue_ms: float
    forward_ms: float
    total_ms: float
    top_probability: float
    allowed_token_mass: float | None
    warnings: tuple[str, ...]


class DecisionService:
    def __init__(self, settings: Settings, model_path: Path) -> None:
        self.settings = settings
        self.model_path = model_path
        self._loader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="llama-load")
        self._executor: ThreadPoolExecutor | None = None  # one thread per worker, once the model is loaded
        self._idle: queue.SimpleQueue[Work] = queue.SimpleQueue()  # each worker's engine, while it is free
        self._admitted = 0
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._draining = False
        self._pending: set[Future[Decided]] = set()
        self._waiting: set[asyncio.Future[Decided]] = set()  # what requests await; cancelled at the deadline
        self._runtime: LlamaRuntime | None = None
        self._engines: list[DecisionEngine] = []
        self.workers = 0
        self._methods: dict[str, Method] = {}
        self._identity: ModelIdentity | None = None
        self._results = ResultCache(settings.result_cache_entries)
        self.prefix_cache: PrefixCache | None = None

    @property
    def ready(self) -> bool:
        return self._ready.is_set()

    # -- start-up --------------------------------------------------------------------------------------
    def load(self) -> Future[None]:
        """Verify, load and warm up on a thread of its own; the future fails if the model cannot serve."""
        return self._loader.submit(self._load)

    def _load(self) -> None:
        started = time.perf_counter()
        model = digest(self.model_path, self.settings.model_sha256)  # before llama.cpp reads the file
        runtime = LlamaRuntime(self.model_path, self.settings)
        self._runtime = runtime
        letters_frame = runtime.chat_frame(self.settings.chat_template, LETTERS_SYSTEM_TEXT)
        answers_frame = runtime.chat_frame(self.settings.chat_template, ANSWERS_SYSTEM_TEXT)
        likelihood = Likelihood(answers_frame)
        letters = Letters(letters_frame, runtime.slot_tokens(letters_frame))
        self._methods = {method.name: method for method in (letters, likelihood, Pmi(likelihood))}
        tokenizer = PromptTokenizer(runtime)
        self.workers = self.settings.worker_count(runtime.cpu_only)
        self.prefix_cache = PrefixCache(self.settings.cache_bytes if self.settings.cache_bytes is not None
                                        else default_budget(model.bytes, runtime.context_bytes * self.workers))
        self._engines = worker_engines(runtime, self.prefix_cache, self.workers, self.settings.threads_batch)
        for engine in self._engines:
            self._idle.put(Work(tokenizer, engine))
        self._identity = ModelIdentity.of(model, runtime.facts)
        probes = [DecisionRequest(decision=WARMUP_DECISION.model_copy(update={"state": state}))
                  for state in EXACTNESS_PROBES]
        inexact = check_exact(tokenizer, [p for r in probes for p in (letters.plan(r), likelihood.plan(r))])
        if inexact:
            LOG.warning("prompt pieces do not add up to the whole prompt's tokens for this model's tokenizer; "
                        "scores stay deterministic, prompts read a few more tokens",
                        extra={"fields": {"problems": inexact[:4]}})
        warm = [self._decide(DecisionRequest(decision=WARMUP_DECISION, scoring=Scoring(name)), time.perf_counter())
                for name in self._methods]  # /ping must not say 200 before every method works
        LOG.info("ready", extra={"fields": {
            "model": self._identity.document, "model_hash_ms": round(model.hash_ms, 1),
            "load_ms": round((time.perf_counter() - started) * 1000, 1), "exact_tokens": not inexact,
            "default_scoring": self.settings.scoring, "warmup_prompt_tokens": warm[0].prompt_tokens,
            "head_tokens": {name: len(tokenizer.head(frame.head)) for name, frame in
                            (("letters", letters_frame), ("likelihood", answers_frame), ("pmi", answers_frame))},
            "calibration": self.settings.calibration.sha256[:12] if self.settings.calibration else None,
            "prefix_cache_bytes": self.prefix_cache.budget, "threads": self.settings.threads, "workers": self.workers,
            "queue_size": self.settings.queue_size, "body_timeout_seconds": self.settings.body_timeout_seconds}})
        self._executor = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="llama-worker")
        self._ready.set()  # after the line: whoever sees /ping 200 finds "ready" in the log
        self._executor.submit(self._enable_partial_reuse,
                              [t for r in probes for t in tokenizer.tokens(letters.plan(r)).joined()])

    def _enable_partial_reuse(self, probe_tokens: list[int]) -> None:
        """The workers' first job after /ping says 200, on one engine, then the rule for all (they share one model):
        health checks need not wait for this probe (~1.5 s here); decisions that arrive meanwhile run without
        partial reuse, and score the same either way."""
        started = time.perf_counter()
        work = self._idle.get()
        try:
            why_off = work.engine.enable_partial_reuse(probe_tokens)
        except DecodeAbortedError:
            why_off = ["the probe was stopped (drain deadline)"]
        finally:
            self._idle.put(work)
        for engine in self._engines:
            engine.reuse = work.engine.reuse
        LOG.info("partial reuse", extra={"fields": {"enabled": not why_off, "why_off": why_off[:4],
                                                    "probe_ms": round((time.perf_counter() - started) * 1000, 1)}})

    # -- admission -------------------------------------------------------------------------------------
    def _admit(self, count: int) -> None:
        if self._draining:
            raise ShuttingDownError
        if not self.ready:
            raise NotReadyError
        if self._admitted and self._admitted + count > self.settings.queue_size:
            raise QueueFullError
        self._admitted += count

    async def decide(self, request: DecisionRequest) -> Decided:
        answer = (await self.decide_all([request]))[0]
        if isinstance(answer, BaseException):
            try:
                raise answer
            finally:  # the traceback holds this frame, which holds the error: a cycle keeping the input alive
                del answer
        return answer

    async def decide_all(self, requests: Sequence[DecisionRequest]) -> list[Decided | BaseException]:
        """Every request's answer (or its error) in input order; run in the order that reuses most."""
        admitted_at = time.perf_counter()
        with self._lock:
            self._admit(len(requests))
            jobs: dict[int, Future[Decided]] = {}
            assert self._executor is not None  # ready
            for index in reuse_order(requests, self.settings.scoring):
                job = self._executor.submit(self._decide, requests[index], admitted_at)
                self._pending.add(job)
                job.add_done_callback(self._release)  # a place frees when its work ends, not when a client leaves
                jobs[index] = job
        waiting = [asyncio.wrap_future(jobs[i]) for i in range(len(requests))]
        self._waiting.update(waiting)
        try:
            done = await asyncio.gather(*waiting, return_exceptions=True)
        except asyncio.CancelledError:  # the client left: queued work nobody waits for is never run
            for job in jobs.values():
                job.cancel()
            raise
        finally:
            self._waiting.difference_update(waiting)
            # A job holds its exception, whose traceback holds this frame: a cycle that kept a refused
            # request's input (up to 6 MB, far more as tokens) in memory until the cyclic GC happened to run.
            del jobs, waiting
        return [self._handed_back(answer) for answer in done]

    def _handed_back(self, answer: Decided | BaseException) -> Decided | BaseException:
        if isinstance(answer, DecodeAbortedError | asyncio.CancelledError) and self._draining:
            return ShuttingDownError()
        if isinstance(answer, PromptTooLongError | RequestError):
            # A caller's mistake needs no traceback, and its frames hold the refused input (a 6 MB state, its
            # JSON and its UTF-8 bytes) for as long as the error lives, which reaches past the response.
            answer.__traceback__, answer.__context__ = None, None
        return answer

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
        """At the deadline every unfinished decision is answered 503 at once; the running decode is told to stop
        and finishes in the background (on a loaded CPU that can take seconds, which no caller waits for)."""
        with self._lock:
            pending = list(self._pending)
        for job in pending:
            job.cancel()  # succeeds for work that has not started
        for waiter in list(self._waiting):
            waiter.cancel()  # the request stops waiting, whatever the worker is doing
        if pending and self._runtime is not None:
            self._runtime.request_abort()  # every worker's context

    # -- one decision (worker thread) ------------------------------------------------------------------------
    def _score(self, request: DecisionRequest, method: str) -> MethodScores:
        """On whichever worker's engine is free: there is one per executor thread, so one always is."""
        work = self._idle.get()
        try:
            return self._methods[method].score(request, work)
        finally:
            self._idle.put(work)

    def _decide(self, request: DecisionRequest, admitted_at: float) -> Decided:
        assert self._identity is not None
        started = time.perf_counter()
        method = request.method(self.settings.scoring)
        key = result_key(request, method)
        raw: MethodScores | None = self._results.get(key)
        source = "result" if raw is not None else None
        if raw is None:
            raw = self._score(request, method)
            self._results.put(key, raw)
        scores = score(raw, method, request.temperature, self.settings.calibration)
        finished = time.perf_counter()
        timing = Timing(queue_ms=(started - admitted_at) * 1000, total_ms=(finished - admitted_at) * 1000,
                        source=source)
        body = render(request, method, raw=raw, scores=scores, model=self._identity, timing=timing)
        effort = raw.effort
        return Decided(body=body, method=method, prompt_tokens=effort.prompt_tokens,
                       evaluated_tokens=0 if source else effort.evaluated_tokens,
                       cached_tokens=effort.prompt_tokens if source else effort.cached_tokens,
                       cache_source=source or effort.cache_source, queue_ms=timing.queue_ms,
                       forward_ms=0.0 if source else effort.forward_ms, total_ms=timing.total_ms,
                       top_probability=max(scores.probabilities), allowed_token_mass=raw.allowed_token_mass,
                       warnings=tuple(scores.warnings))

    def close(self) -> None:
        """Finish the running decision, then free the native objects."""
        self._ready.clear()
        self._loader.shutdown(wait=True, cancel_futures=True)
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
        for engine in self._engines:
            engine.close()
        if self._runtime is not None:
            self._runtime.close()


def reuse_order(requests: Sequence[DecisionRequest], default_method: str) -> list[int]:
    """Indexes grouped by method (each has its own head), then state, then criterion, each group where it first
    appears: consecutive decisions then share the longest prefix. Only the speed depends on this order."""
    ranks: dict[tuple[str, ...], int] = {}
    keys = []
    for index, request in enumerate(requests):
        method, state = request.method(default_method), canonical_state(request.decision.state)
        groups = ((method,), (method, state), (method, state, request.decision.question))
        keys.append((*(ranks.setdefault(group, len(ranks)) for group in groups), index))
    return [key[-1] for key in sorted(keys)]
