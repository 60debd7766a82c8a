"""Closed-loop load on the decision endpoint: every request counted, every answer checked.

N clients each send one request after another for a fixed time. An outcome is
fine only if it is a 200 whose body answers the request that was sent (same
decision id, one finite probability per option, summing to 1), or a 503 with
Retry-After and code `queue_full` while more clients run than the queue admits.
Anything else (another status, a timeout, a dropped connection) is a problem,
listed by name. Meanwhile the adapter's VmRSS is sampled from /proc, and two
slow senders trickle bodies in, to show a slow client costs the others nothing.
"""

from __future__ import annotations

import json
import math
import random
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

import httpx
import numpy as np

from scripts.common.stats import summarize
from semif_adapter.settings import DEFAULT_BODY_TIMEOUT_SECONDS

from .bodies import error_code, load_body, post_json
from .rawhttp import RawResponse, trickle
from .servers import Server, read_rss_kib

SLOW_GIVE_UP_AFTER_TIMEOUT_S = 15.0  # a slow sender waits this much past the adapter's body timeout
MAX_LISTED_PROBLEMS = 20


@dataclass(frozen=True)
class LoadConfig:
    clients: int = 16
    duration_s: float = 60.0
    request_timeout_s: float = 60.0  # SageMaker's limit for one invocation
    window_s: float = 10.0  # RSS is compared between the first and the last window of this length
    max_rss_growth: float = 0.05
    rss_interval_s: float = 0.25
    # Before the clock starts: one-time allocations and the bounded caches' filling are not growth. Measured on
    # the embedded model with the reliability servers' settings: RSS rises ~20 MiB over the first ~30 requests
    # of the mix, then stays within 3 MiB over the next 60.
    warmup_requests: int = 30
    slow_senders: bool = True
    seed: int = 20261130


@dataclass(frozen=True)
class Outcome:
    client: int
    sent_s: float  # since the load started
    answered_s: float
    status: int | None  # None: no HTTP answer (see `error`)
    code: str | None = None  # error.code of a JSON error body
    retry_after: str | None = None
    error: str | None = None  # the transport error's class, when there was no answer
    answer_problem: str | None = None  # a 200 that does not answer the request sent

    @property
    def latency_ms(self) -> float:
        return (self.answered_s - self.sent_s) * 1000


@dataclass
class SlowSender:
    """A client that sends its body a few bytes at a time."""

    name: str
    expect: str  # "200" (it finishes its body) or "408" (it never does)
    status: int | None = None
    code: str | None = None
    seconds: float = 0.0
    started_s: float = 0.0


@dataclass
class LoadResult:
    config: LoadConfig
    queue_size: int
    outcomes: list[Outcome]
    rss: list[tuple[float, int]]  # (seconds since start, KiB)
    elapsed_s: float
    slow: list[SlowSender] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def by_status(self) -> dict[str, int]:
        counts = Counter(str(o.status) if o.status is not None else f"no answer ({o.error})" for o in self.outcomes)
        return dict(sorted(counts.items()))

    def rss_summary(self) -> dict[str, Any]:
        """Median VmRSS of the first and of the last window, and the growth between them."""
        if not self.rss:
            return {}
        window = min(self.config.window_s, self.elapsed_s / 3)
        first = [kib for t, kib in self.rss if t <= window]
        last = [kib for t, kib in self.rss if t >= self.elapsed_s - window]
        first_median, last_median = float(np.median(first or [self.rss[0][1]])), float(np.median(last))
        return {"before_kib": self.rss[0][1], "after_kib": self.rss[-1][1], "peak_kib": max(k for _, k in self.rss),
                "window_s": round(window, 1), "first_window_median_kib": first_median,
                "last_window_median_kib": last_median, "growth": round(last_median / first_median - 1, 4),
                "samples": len(self.rss)}

    def served_during_slow(self) -> int:
        """200s answered while a slow sender was connected: a slow client must not hold up the others."""
        return sum(1 for o in self.outcomes if o.status == 200 and any(
            s.started_s < o.answered_s < s.started_s + s.seconds for s in self.slow))

    def summary(self) -> dict[str, Any]:
        answered = [o for o in self.outcomes if o.status is not None]
        latencies = [o.latency_ms for o in answered]
        return {
            "config": asdict(self.config), "queue_size": self.queue_size, "sent": len(self.outcomes),
            "answered": len(answered), "by_status": self.by_status(),
            "codes": dict(Counter(o.code for o in answered if o.code)),
            "latency_ms": latency_summary(latencies), "elapsed_s": round(self.elapsed_s, 1),
            "throughput_per_s": round(len(answered) / self.elapsed_s, 2) if self.elapsed_s else 0.0,
            "rss": self.rss_summary(), "slow_senders": [asdict(s) for s in self.slow],
            "answered_200_while_slow_senders_connected": self.served_during_slow(),
            "problems": self.problems,
        }


def latency_summary(values_ms: list[float]) -> dict[str, float | int]:
    """The benchmark's summary cut to what the report shows (n, p50, p95, max; 0.1 ms)."""
    summary = summarize(values_ms, digits=1)
    return {key: summary[key] for key in ("n", "p50", "p95", "max") if key in summary}


def check_answer(response: httpx.Response, body: dict[str, Any]) -> str | None:
    """Why a 200 does not answer `body`, or None: a load that returns wrong answers is not serving."""
    try:
        document = response.json()
        probabilities = document["probabilities"]
    except (ValueError, KeyError, TypeError):
        return "200 without a decision document"
    decision = body["decision"]
    if document.get("decision_id") != decision["id"]:
        return f"200 for {document.get('decision_id')!r}, sent {decision['id']!r}"
    if document.get("option_ids") != [o["id"] for o in decision["options"]]:
        return "200 with other option ids than were sent"
    if not all(isinstance(p, float) and math.isfinite(p) for p in probabilities) \
            or abs(math.fsum(probabilities) - 1) > 1e-6:
        return "200 with probabilities that are not a distribution"
    return None


def outcome_of(client: int, sent: float, now: float, body: dict[str, Any], *,
               response: httpx.Response | None, error: Exception | None) -> Outcome:
    if response is None:
        return Outcome(client, sent, now, None, error=type(error).__name__)
    code = error_code(response) if response.status_code != 200 else None
    return Outcome(client, sent, now, response.status_code, code, response.headers.get("retry-after"),
                   answer_problem=check_answer(response, body) if response.status_code == 200 else None)


def problem_of(outcome: Outcome, queue_can_fill: bool) -> str | None:
    """Why one outcome of a plain load is a failure, or None."""
    if outcome.status == 200:
        return outcome.answer_problem
    if outcome.status == 503 and outcome.code == "queue_full" and outcome.retry_after:
        return None if queue_can_fill else "503 queue_full although fewer clients run than the queue admits"
    if outcome.status is None:
        return f"no answer: {outcome.error}"
    return f"status {outcome.status} ({outcome.code or 'no JSON error code'})"


class RssSampler(threading.Thread):
    """VmRSS of one process every `interval_s`, until stopped or the process is gone."""

    def __init__(self, pid: int, started: float, interval_s: float) -> None:
        super().__init__(daemon=True)
        self.pid, self.started, self.interval_s = pid, started, interval_s
        self.samples: list[tuple[float, int]] = []
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            kib = read_rss_kib(self.pid)
            if kib is None:
                return
            self.samples.append((round(time.monotonic() - self.started, 3), kib))
            self.done.wait(self.interval_s)


@dataclass
class Clients:
    """What the client threads of one run share: where to send, until when, and where outcomes go."""

    url: str
    config: LoadConfig
    started: float = field(default_factory=time.monotonic)
    outcomes: list[Outcome] = field(default_factory=list)  # list.append is atomic: the threads share it
    last_round: threading.Event = field(default_factory=threading.Event)  # set: one more request each, then stop

    @property
    def deadline(self) -> float:
        return self.started + self.config.duration_s

    def now(self) -> float:
        return time.monotonic() - self.started

    def threads(self) -> list[threading.Thread]:
        return [threading.Thread(target=self.client, args=(i,), daemon=True) for i in range(self.config.clients)]

    def client(self, index: int) -> None:
        """Request after request until the deadline; once `last_round` is set, one more and stop."""
        rng = random.Random(self.config.seed * 1000 + index)
        with httpx.Client(timeout=self.config.request_timeout_s) as client:
            number = 0
            while time.monotonic() < self.deadline:
                final = self.last_round.is_set()
                body = load_body(rng, f"c{index}-{number}")
                number += 1
                sent = self.now()
                response, error = None, None
                try:
                    response = post_json(client, self.url, body)
                except httpx.HTTPError as caught:
                    error = caught
                self.outcomes.append(outcome_of(index, sent, self.now(), body, response=response, error=error))
                if final:
                    return


def slow_sender(url: str, sender: SlowSender, started: float, body: bytes, *, duration_s: float,
                give_up_s: float) -> None:
    """Trickle `body`: all of it over about `duration_s` ("200"), or a byte a second, never finishing ("408")."""
    sender.started_s = time.monotonic() - started
    if sender.expect == "200":
        steps = max(int(duration_s / 0.5), 2)
        result = trickle(url, "/invocations", body, chunk=-(-len(body) // steps), interval_s=0.5,
                         give_up_s=give_up_s)
    else:
        result = trickle(url, "/invocations", body, chunk=1, interval_s=1.0, give_up_s=give_up_s,
                         stop_after=len(body) - 1)
    response: RawResponse | None = result[0]
    sender.seconds = round(result[1], 1)
    if response is not None:
        sender.status, sender.code = response.status, response.error_code()


def slow_problems(slow: list[SlowSender]) -> list[str]:
    problems = []
    for sender in slow:
        if sender.expect == "200" and sender.status != 200:
            problems.append(f"slow sender {sender.name}: finished its body but got {sender.status} {sender.code}")
        if sender.expect == "408" and (sender.status, sender.code) != (408, "body_timeout"):
            problems.append(f"slow sender {sender.name}: expected JSON 408 body_timeout, got {sender.status} "
                            f"{sender.code} after {sender.seconds} s")
    return problems


def warm_up(server: Server, config: LoadConfig) -> None:
    """A few requests of the mix before the clock starts (their own seed): first-use allocations settle."""
    rng = random.Random(config.seed - 1)
    with httpx.Client(timeout=config.request_timeout_s) as client:
        for number in range(config.warmup_requests):
            post_json(client, server.url, load_body(rng, f"warm-{number}")).raise_for_status()


def run_load(server: Server, config: LoadConfig) -> LoadResult:
    """Run the load; the result lists every outcome and, in `problems`, everything that went wrong."""
    ready = server.ready_fields()
    queue_size = int(ready.get("queue_size", 0))
    give_up_s = float(ready.get("body_timeout_seconds", DEFAULT_BODY_TIMEOUT_SECONDS)) + SLOW_GIVE_UP_AFTER_TIMEOUT_S
    warm_up(server, config)
    clients = Clients(server.url, config)
    sampler = RssSampler(server.pid, clients.started, config.rss_interval_s)
    sampler.start()
    threads = clients.threads()
    slow = [SlowSender("finishes", "200"), SlowSender("stalls", "408")] if config.slow_senders else []
    body = json.dumps(load_body(random.Random(config.seed + 1), "slow-sender")).encode()
    trickling = {"duration_s": config.duration_s / 2, "give_up_s": give_up_s}
    slow_threads = [threading.Thread(target=slow_sender, args=(server.url, s, clients.started, body),
                                     kwargs=trickling, daemon=True) for s in slow]
    for thread in threads + slow_threads:
        thread.start()
    for thread in threads:
        thread.join(config.duration_s + config.request_timeout_s + 5)
    elapsed = clients.now()
    sampler.done.set()
    for thread in slow_threads:
        thread.join(give_up_s + 10)
    sampler.join(5)
    result = LoadResult(config, queue_size, sorted(clients.outcomes, key=lambda o: o.sent_s), sampler.samples,
                        elapsed, slow)
    result.problems = judge(result)
    return result


def judge(result: LoadResult) -> list[str]:
    config = result.config
    queue_can_fill = config.clients + len(result.slow) > result.queue_size
    found = [p for p in (problem_of(o, queue_can_fill) for o in result.outcomes) if p]
    problems = [f"{count} x {problem}" for problem, count in Counter(found).most_common(MAX_LISTED_PROBLEMS)]
    if not result.outcomes:
        problems.append("no request was sent")
    rss = result.rss_summary()
    if not rss:
        problems.append("no RSS sample: the adapter process was gone")
    elif rss["growth"] >= config.max_rss_growth:
        problems.append(f"RSS grew {rss['growth']:.1%} between the first and last {rss['window_s']} s "
                        f"(limit {config.max_rss_growth:.0%})")
    problems += slow_problems(result.slow)
    if result.slow and not result.served_during_slow():
        problems.append("no other request was answered while the slow senders were connected")
    return problems
