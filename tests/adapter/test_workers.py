"""Several decision workers, each on a llama.cpp context of its own over one model: the cores they share, the
prefix cache they share, and numbers that never depend on which worker ran a decision or what ran beside it."""

from __future__ import annotations

import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from support.engines import OPENING, QUESTIONS, STATES, Engine, request_of, score_alone, tail

from semif_adapter.core.methods import PromptRunner
from semif_adapter.engine.core_share import CoreShare
from semif_adapter.engine.kv_engine import worker_engines
from semif_adapter.engine.llama_runtime import LlamaRuntime
from semif_adapter.engine.prefix_cache import PrefixCache
from semif_adapter.settings import load_settings


class Hold:
    """Records the most cores ever granted at once while calls hold them for a moment."""

    def __init__(self, share: CoreShare) -> None:
        self.share, self.lock, self.held, self.peak, self.grants = share, threading.Lock(), 0, 0, []

    def call(self) -> None:
        with self.share.threads() as granted:
            with self.lock:
                self.held += granted
                self.peak = max(self.peak, self.held)
                self.grants.append(granted)
            time.sleep(0.002)
            with self.lock:
                self.held -= granted


def test_a_lone_worker_gets_every_core_and_concurrent_ones_split_them():
    share = CoreShare(4)
    with share.working(), share.threads() as alone:
        assert alone == 4 and share.snapshot() == (0, 1)
    with share.working(), share.working(), share.threads() as first, share.threads() as second:
        assert (first, second) == (2, 2)
    with share.working(), share.working(), share.working(), share.threads() as first, share.threads() as second:
        assert (first, second) == (2, 2)  # a share rounds up; the third waits for a free core
    assert share.snapshot() == (4, 0)
    with pytest.raises(ValueError):
        CoreShare(0)


def test_a_call_waiting_on_a_last_call_gets_every_core_it_frees():
    """A request's second question waits for its first question's call; when that was the first one's last call,
    the second gets both cores, not a half share with the other core idle."""
    share = CoreShare(2)
    first_in_call, granted = threading.Event(), []

    def second() -> None:
        with share.working():
            first_in_call.wait()
            with share.threads() as cores:  # waits: the first call holds both cores
                granted.append(cores)

    with ThreadPoolExecutor(1) as pool:
        with share.working():
            with share.threads(last=True) as alone:
                waiting = pool.submit(second)
                first_in_call.set()
                while share.snapshot()[1] < 2:
                    time.sleep(0.001)
                time.sleep(0.01)  # the second is now waiting for a core
            waiting.result(timeout=5)
        assert alone == 2 and granted == [2]
    with share.working(), share.working():  # without `last`, the one still working keeps its share
        with share.threads():
            pass
        with share.threads() as half:
            assert half == 1
    assert share.snapshot() == (2, 0)


def test_two_workers_on_a_cpu_one_with_a_gpu_unless_set():
    two_threads, one_thread = load_settings({"SM_LLAMA_CPP_THREADS": "2"}), load_settings({"SM_LLAMA_CPP_THREADS": "1"})
    assert (two_threads.worker_count(cpu_only=True), two_threads.worker_count(cpu_only=False)) == (2, 1)
    assert one_thread.worker_count(cpu_only=True) == 1  # never more workers than threads by default
    chosen = load_settings({"SM_LLAMA_CPP_THREADS": "1", "SEMIF_WORKERS": "3"})
    assert (chosen.worker_count(cpu_only=True), chosen.worker_count(cpu_only=False)) == (3, 3)


def test_the_workers_never_hold_more_threads_than_there_are_cores():
    share = CoreShare(2)
    hold = Hold(share)

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(30):
            with share.working():
                for _ in range(rng.randint(1, 3)):
                    hold.call()

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(worker, range(4)))
    assert hold.peak == 2 and set(hold.grants) <= {1, 2} and 1 in hold.grants
    assert share.snapshot() == (2, 0)


def test_a_prefix_is_evaluated_by_one_worker_while_the_others_wait_for_it():
    cache, order = PrefixCache(1 << 20), []

    def evaluate(name: str) -> None:
        with cache.evaluating(("head", "state")):
            order.append(f"{name} in")
            time.sleep(0.05)
            order.append(f"{name} out")

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(evaluate, ("a", "b")))
    assert order[1] == f"{order[0].split()[0]} out", order  # never both inside at once
    with cache.evaluating(("head", "state")), cache.evaluating(("head", "other")):
        pass  # different prefixes do not wait for each other


class Workers:
    """The service's arrangement in process: one engine per context of one runtime, one shared cache and core
    share, each engine used by one thread at a time."""

    def __init__(self, runtime: LlamaRuntime, count: int, cache_bytes: int, *, save_prefix_later: bool = False) -> None:
        self.methods = Engine(runtime, 0)  # the methods (and their frames); its own engine stays unused
        self.cache = PrefixCache(cache_bytes)
        engines = worker_engines(runtime, self.cache, count, cores=2)
        self.cores = engines[0].cores
        assert self.cores is not None and all(engine.cores is self.cores for engine in engines)
        self.works = [PromptRunner(self.methods.tokenizer, engine, save_prefix_later) for engine in engines]

    def score(self, worker: int, method: str, state: object, question: str) -> tuple[bytes, str, int]:
        raw = self.methods.methods[method].score(request_of(state, question, method=method), self.works[worker])
        return raw.option_logits.tobytes(), raw.effort.cache_source, raw.effort.cached_tokens


def test_two_workers_at_once_give_the_numbers_of_one_engine_alone(runtime):
    states = [*STATES, OPENING + tail(3, 220)]  # one long enough to pass 256 tokens
    cases = [(m, s, q) for m in ("letters", "likelihood", "pmi") for s in range(len(states)) for q in range(2)]
    rng = random.Random(11)
    jobs = [rng.choice(cases) for _ in range(24)]
    reference = {(method, state, question): score_alone(runtime, method, states[state], QUESTIONS[question])[0]
                 for method, state, question in sorted(set(jobs))}
    workers = Workers(runtime, 2, 64 << 20)
    sources: list[str] = []

    def run(worker: int) -> None:
        for method, state, question in jobs[worker::2]:
            logits, source, _ = workers.score(worker, method, states[state], QUESTIONS[question])
            assert logits == reference[(method, state, question)], (worker, method, state, question)
            sources.append(source)

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(run, (0, 1)))  # (map re-raises a worker's failed assertion here)
    assert len(sources) == len(jobs) and {"kv", "host"} <= set(sources)
    assert workers.cores.snapshot() == (2, 0)
    for work in workers.works:
        work.engine.close()


def test_two_workers_asked_about_one_new_state_at_once_evaluate_it_once(runtime):
    workers = Workers(runtime, 2, 64 << 20)
    state = OPENING + tail(5, 150)
    workers.score(0, "letters", STATES[0], QUESTIONS[0])  # the head, evaluated and pinned, on both sides
    workers.score(1, "letters", STATES[1], QUESTIONS[0])
    start = threading.Barrier(2)

    def ask(worker: int) -> tuple[bytes, str, int]:
        start.wait()
        return workers.score(worker, "letters", state, QUESTIONS[worker])

    with ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(ask, (0, 1)))
    assert sorted(source for _, source, _ in answers) == ["host", "kv"], answers  # one evaluated, one restored
    restored = next(cached for _, source, cached in answers if source == "host")
    assert restored > 150  # the whole prefix: head and state
    for work in workers.works:
        work.engine.close()


def test_a_new_state_is_saved_once_its_answer_is_back_and_other_workers_wait_for_it_until_then(runtime):
    """The service hands an answer back before its new state is copied to the host cache (`settle`); a worker
    asking about that state meanwhile waits, then restores it rather than evaluating it again."""
    workers = Workers(runtime, 2, 64 << 20, save_prefix_later=True)
    workers.score(0, "letters", STATES[0], QUESTIONS[0])  # the head, evaluated and pinned
    workers.works[0].engine.save_pending_prefix()
    state = OPENING + tail(6, 150)
    first = workers.score(0, "letters", state, QUESTIONS[0])
    assert first[1] == "kv" and len(workers.cache) == 2  # the head and STATES[0]: the new state is not saved yet
    with ThreadPoolExecutor(1) as pool:
        second = pool.submit(workers.score, 1, "letters", state, QUESTIONS[1])
        time.sleep(0.5)
        assert not second.done()  # waiting for the prefix worker 0 decoded, not evaluating it alongside
        workers.works[0].engine.save_pending_prefix()
        logits, source, cached = second.result(timeout=120)
    assert len(workers.cache) == 3 and source == "host" and cached > 150
    assert logits == score_alone(runtime, "letters", state, QUESTIONS[1])[0]
    for work in workers.works:
        work.engine.close()
