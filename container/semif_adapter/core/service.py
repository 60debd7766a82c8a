"""Our engine's decision service: owns the model and the decision workers, one context each.

llama.cpp contexts are not thread-safe, so each decision worker owns a context of its own on the one model
(`SEMIF_WORKERS`, 2 on a CPU): two decisions at once on one thread each outrun one decision at a time on both
cores, and a lone decision still gets every core (`core_share`). The workers share the host prefix cache, the
result cache and pmi's baselines; a decision's numbers do not depend on which worker ran it, nor on what ran
beside it (llama.cpp releases the GIL, so the event loop keeps answering `/ping`). Work is admitted by the
bounded queue both services hold (`admission.AdmissionQueue`). A batch runs in an order that maximises prefix reuse
(grouped by state, then criterion); its answers are returned in input order, each exactly what the decision alone
would have been given.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from ..engine.batch_decoder import DecodeAbortedError
from ..engine.integrity import digest
from ..engine.kv_engine import KvEngine, worker_engines
from ..engine.llama_runtime import LlamaRuntime
from ..engine.prefix_cache import PrefixCache, default_budget
from ..engine.tokens import PromptTokenizer, check_exact
from ..errors import NotReadyError, PromptTooLongError, RequestError, ServiceError, ShuttingDownError
from .admission import AdmissionQueue
from .conversation import Conversation, conversation_text
from .decided import RESULT_SOURCE, Decided, Timing, Tokens
from .identity import ModelIdentity
from .methods import Letters, Likelihood, Method, MethodScores, Pmi, PromptRunner
from .model_load import ModelLoad
from .prompt import ANSWERS_SYSTEM_TEXT, LETTERS_SYSTEM_TEXT
from .question import Answer, Question, Scoring
from .result_cache import ResultCache, result_key
from .scoring import Scores, score
from .service_settings import ServiceSettings
from .worker_queues import worker_queues

LOG = logging.getLogger("semif_adapter")
WARMUP_ANSWERS = (Answer("yes", "Yes."), Answer("no", "No."))
WARMUP_QUESTION = Question(state="The adapter is starting.", criterion="Is it ready?", answers=WARMUP_ANSWERS,
                           method=Scoring.PMI)
# Probe states for the start-up tokenization check: edges where a tokenizer's pre-split could merge across a cut.
EXACTNESS_PROBES: tuple[object, ...] = (
    "The adapter is starting.", " leading and trailing spaces ", "ends with digits 2024", "\"quoted\", and a comma,",
    "line one\nline two\n", "ünïcödé, emoji 🙂 and CJK 漢字", {"ticket": 42, "text": "JSON state"}, ["a", 1, None],
)


class DecisionService:
    def __init__(self, settings: ServiceSettings, model_path: Path) -> None:
        self.settings = settings
        self.model_path = model_path
        self.loading = ModelLoad("llama-load")
        self._executor: ThreadPoolExecutor | None = None  # one thread per worker, once the model is loaded
        self._idle: queue.SimpleQueue[PromptRunner] = queue.SimpleQueue()  # each worker's engine, while it is free
        self._lock = threading.Lock()  # guards `_pending`
        self._ready = threading.Event()
        self.admission = AdmissionQueue(settings.queue_size, settings.drain_seconds, self._unready)
        self._pending: set[Future[Decided]] = set()
        self._runtime: LlamaRuntime | None = None
        self._engines: list[KvEngine] = []
        self.workers = 0
        self._methods: dict[str, Method] = {}
        self._results = ResultCache(settings.result_cache_entries)
        self.prefix_cache: PrefixCache | None = None

    @property
    def saves_prefixes(self) -> bool:
        """Whether a state computed here is saved to the host cache for the next request (off when its budget is
        0)."""
        return self.prefix_cache is not None and self.prefix_cache.budget > 0

    @property
    def ready(self) -> bool:
        return self._ready.is_set()

    # -- start-up --------------------------------------------------------------------------------------
    def load(self) -> Future[None]:
        """Verify, load and warm up on a thread of its own; the future fails if the model cannot serve."""
        return self.loading.start(self._load)

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
            self._idle.put(PromptRunner(tokenizer, engine, save_prefix_later=True))
        identity = self.loading.found(ModelIdentity.of(model, runtime.facts, self.settings.model_name))
        probes = [replace(WARMUP_QUESTION, state=state) for state in EXACTNESS_PROBES]
        probe_tokens = [t for r in probes for t in tokenizer.tokens(letters.plan(r)).joined()]
        apart = self._engines[0].enable_mixed_windows(probe_tokens)  # before any decision: it sets the numbers' bits
        for engine in self._engines[1:]:
            engine.mixed = self._engines[0].mixed
        inexact = check_exact(tokenizer, [p for r in probes for p in (letters.plan(r), likelihood.plan(r))])
        if inexact:
            LOG.warning("prompt pieces do not add up to the whole prompt's tokens for this model's tokenizer; "
                        "scores stay deterministic, prompts read a few more tokens",
                        extra={"fields": {"problems": inexact[:4]}})
        with self._engine() as runner:  # /ping must not say 200 before every method works
            warm = [self._decide(replace(WARMUP_QUESTION, method=Scoring(name)), time.perf_counter(), runner)
                    for name in self._methods]
        LOG.info("ready", extra={"fields": {
            "model": identity.document, "model_name": identity.name,
            "model_hash_ms": round(model.hash_ms, 1),
            "load_ms": round((time.perf_counter() - started) * 1000, 1), "exact_tokens": not inexact,
            "branches_share_calls": not apart, "branches_apart_because": apart[:4],
            "prompt_frame": runtime.frame_name(self.settings.chat_template),
            "default_scoring": self.settings.scoring, "systemone_frames": self.settings.frames.describe(),
            "warmup_prompt_tokens": warm[0].prompt_tokens,
            "head_tokens": {name: len(tokenizer.head(frame.head)) for name, frame in
                            (("letters", letters_frame), ("likelihood", answers_frame), ("pmi", answers_frame))},
            "calibration": self.settings.calibration.sha256[:12] if self.settings.calibration else None,
            "prefix_cache_bytes": self.prefix_cache.budget, "threads": self.settings.threads, "workers": self.workers,
            "queue_size": self.settings.queue_size, "body_timeout_seconds": self.settings.body_timeout_seconds}})
        self._executor = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="llama-worker")
        self._ready.set()  # after the line: whoever sees /ping 200 finds "ready" in the log
        self._executor.submit(self._enable_partial_reuse, probe_tokens)

    def _enable_partial_reuse(self, probe_tokens: list[int]) -> None:
        """The workers' first job after /ping says 200, on one engine, then the rule for all (they share one model):
        health checks need not wait for this probe (~1.5 s here); decisions that arrive meanwhile run without
        partial reuse, and score the same either way."""
        started = time.perf_counter()
        with self._engine() as runner:
            try:
                why_off = runner.engine.enable_partial_reuse(probe_tokens)
            except DecodeAbortedError:
                why_off = ["the probe was stopped (drain deadline)"]
        for engine in self._engines:
            engine.reuse = runner.engine.reuse
        LOG.info("partial reuse", extra={"fields": {"enabled": not why_off, "why_off": why_off[:4],
                                                    "probe_ms": round((time.perf_counter() - started) * 1000, 1)}})

    # -- admission -------------------------------------------------------------------------------------
    def _unready(self) -> ServiceError | None:
        return None if self.ready else NotReadyError()

    async def decide(self, question: Question) -> Decided:
        answer = (await self.decide_all([question]))[0]
        if isinstance(answer, BaseException):
            try:
                raise answer
            finally:  # the traceback holds this frame, which holds the error: a cycle keeping the input alive
                del answer
        return answer

    async def decide_all(self, questions: Sequence[Question]) -> list[Decided | BaseException]:
        """Every question's answer (or its error) in input order; run in the order that reuses most."""
        admitted_at = time.perf_counter()
        questions = self._readable(questions)
        self.admission.admit(len(questions))
        with self._lock:
            jobs: dict[int, Future[Decided]] = {}
            assert self._executor is not None  # ready
            for worker_queue in worker_queues(questions, self.workers):
                for index in worker_queue:
                    job = jobs[index] = Future()
                    self._pending.add(job)
                    job.add_done_callback(self._release)  # a place frees when its work ends, not when a client leaves
                jobs_in_turn = deque((questions[i], jobs[i]) for i in worker_queue)
                self._executor.submit(self._run_queue, jobs_in_turn, admitted_at)
        waiting = [asyncio.wrap_future(jobs[i]) for i in range(len(questions))]
        try:
            with self.admission.waiting_on(waiting):
                done = await asyncio.gather(*waiting, return_exceptions=True)
        except asyncio.CancelledError:  # the client left: queued work nobody waits for is never run
            for job in jobs.values():
                job.cancel()
            raise
        finally:
            # A job holds its exception, whose traceback holds this frame: a cycle that kept a refused
            # request's input (up to 6 MB, far more as tokens) in memory until the cyclic GC happened to run.
            del jobs, waiting
        return [self._for_caller(answer) for answer in done]

    def _readable(self, questions: Sequence[Question]) -> list[Question]:
        """A conversation state as the text the engine's prompt holds, once per state (`conversation_text`)."""
        rendered: dict[int, str] = {}
        out = []
        for asked in questions:
            state = asked.state
            if not (isinstance(state, Conversation) and self._runtime is not None):
                out.append(asked)
                continue
            if id(state) not in rendered:
                rendered[id(state)] = conversation_text(state, self._runtime, self.settings.chat_template)
            out.append(replace(asked, state=rendered[id(state)]))
        return out

    def _for_caller(self, answer: Decided | BaseException) -> Decided | BaseException:
        """An answer as its request gets it: work stopped by the drain deadline is `shutting_down`."""
        if isinstance(answer, DecodeAbortedError | asyncio.CancelledError) and self.admission.draining:
            return ShuttingDownError()
        if isinstance(answer, PromptTooLongError | RequestError):
            # A caller's mistake needs no traceback, and its frames hold the refused input (a 6 MB state, its
            # JSON and its UTF-8 bytes) for as long as the error lives, which reaches past the response.
            answer.__traceback__, answer.__context__ = None, None
        return answer

    def _release(self, job: Future[Decided]) -> None:
        self.admission.release()
        with self._lock:
            self._pending.discard(job)

    def stop_admitting(self) -> None:
        """Refuse new decisions from now on; safe to call from a signal handler (it only sets a flag)."""
        self.admission.stop_admitting()

    def drain(self) -> None:
        """Refuse new work now; at the drain deadline, hand back whatever is still admitted.

        Admitted decisions keep running one by one, so a short queue drains completely. At the
        deadline, work not yet started and the decode still running end with a JSON 503 each
        (retryable elsewhere) instead of a socket cut by the server's hard stop.
        """
        self.admission.drain(self._stop_at_deadline)

    def _stop_at_deadline(self) -> None:
        """At the deadline every unfinished decision is answered 503 at once (`AdmissionQueue` stops the requests'
        waits); the running decode is told to stop and finishes in the background (on a loaded CPU that can take
        seconds, which no caller waits for)."""
        with self._lock:
            pending = list(self._pending)
        for job in pending:
            job.cancel()  # succeeds for work that has not started
        if pending and self._runtime is not None:
            self._runtime.request_abort()  # every worker's context

    # -- decisions (worker threads) -------------------------------------------------------------------------
    def _run_queue(self, worker_queue: deque[tuple[Question, Future[Decided]]], admitted_at: float) -> None:
        """A worker queue's questions one after another on one worker's engine (`worker_queues`), each answered on
        its own future; a question whose future was cancelled (its client left, or the drain deadline) is skipped.

        A failed answer's traceback holds this frame and `_answer`'s, and the future holds the traceback (asyncio
        keeps it apart from the error): neither frame may still hold the future or the question once it is
        answered, or a refused input (a 6 MB state and its tokens) would stay alive until the cyclic GC ran."""
        with self._engine() as runner:
            while worker_queue:
                question, job = worker_queue.popleft()
                if job.set_running_or_notify_cancel():
                    self._answer(job, question, admitted_at, runner)
                del question, job

    def _answer(self, job: Future[Decided], question: Question, admitted_at: float, runner: PromptRunner) -> None:
        """The question's answer on its future, then the engine's save of a new state (`KvEngine.save_pending_prefix`),
        which no answer needs to wait for."""
        try:
            decided = self._decide(question, admitted_at, runner)
        except BaseException as error:  # the request's answer for this question, whatever it is
            job.set_exception(error)
            del job, question  # see `_run_queue`
        else:
            job.set_result(decided)
        finally:
            _save_pending_prefix(runner)

    @contextmanager
    def _engine(self) -> Iterator[PromptRunner]:
        """Whichever worker's engine is free: there is one per executor thread, so one always is. It goes back
        with its prefix saved: no idle engine keeps other workers waiting for a prefix it has not saved yet."""
        runner = self._idle.get()
        try:
            yield runner
        finally:
            _save_pending_prefix(runner)
            self._idle.put(runner)

    def _decide(self, question: Question, admitted_at: float, runner: PromptRunner) -> Decided:
        started = time.perf_counter()
        key = result_key(question)
        raw: MethodScores | None = self._results.get(key)
        from_results = raw is not None
        if raw is None:
            raw = self._methods[question.method.value].score(question, runner)
            self._results.put(key, raw)
        scores = score(raw, question, self.settings.calibration)
        finished = time.perf_counter()
        return answer_of(question, raw, scores, queue_ms=(started - admitted_at) * 1000,
                         total_ms=(finished - admitted_at) * 1000, from_results=from_results)

    @property
    def identity(self) -> ModelIdentity:
        """Which weights produce the scores (known once the model is loaded)."""
        return self.loading.identity

    def close(self) -> None:
        """Finish the running decision, then free the native objects."""
        self._ready.clear()
        self.loading.close()
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
        for engine in self._engines:
            engine.close()
        if self._runtime is not None:
            self._runtime.close()


def answer_of(question: Question, raw: MethodScores, scores: Scores, *, queue_ms: float, total_ms: float,
              from_results: bool = False) -> Decided:
    """Our engine's answer, with everything it measured; one from the result cache computed nothing (its zeros are
    measured ones) and reused the whole prompt."""
    effort = raw.effort
    timing = Timing(total_ms=total_ms, queue_ms=queue_ms, tokenize_ms=0.0 if from_results else effort.tokenize_ms,
                    restore_ms=0.0 if from_results else effort.restore_ms,
                    forward_ms=0.0 if from_results else effort.forward_ms)
    tokens = Tokens(prompt=effort.prompt_tokens, evaluated=0 if from_results else effort.evaluated_tokens,
                    cached=effort.prompt_tokens if from_results else effort.cached_tokens, read=effort.read_tokens,
                    source=RESULT_SOURCE if from_results else effort.cache_source, prefix=effort.prefix_tokens,
                    output_rows=0 if from_results else effort.output_rows)
    baseline = None if raw.baseline_cached is None else from_results or raw.baseline_cached
    return Decided(question=question, scores=scores, method=question.method.value, prompt=raw.prompt, timing=timing,
                   tokens=tokens, allowed_token_mass=raw.allowed_token_mass, baseline_cached=baseline)


def _save_pending_prefix(runner: PromptRunner) -> None:
    """The engine's deferred save; a failure costs that state's host-cache entry, never a worker queue or an engine."""
    try:
        runner.engine.save_pending_prefix()
    except Exception:
        LOG.exception("saving a prefix to the host cache failed")
