"""Loopback HTTP clients: sequential decisions, closed-loop concurrency, bursts, and the chat path.

Bodies are serialised before the clock starts and responses parsed after it
stops: the client's own JSON work is not the server's latency. Every loop is
bounded by its request list, and every request by a timeout that is counted,
never retried.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from dataclasses import dataclass
from typing import Any

import httpx

from bench.common.workload import Spec, option_list
from semif_adapter.core.prompt import LETTERS_SYSTEM_TEXT, letters_plan
from semif_adapter.doors.request_schema import DecisionRequest
from semif_adapter.engine.prompt_plan import SLOT_LETTERS, ChatFrame

TIMEOUT = httpx.Timeout(300.0, connect=10.0)
JSON_HEADERS = {"content-type": "application/json"}
CHAT_MAX_TOKENS = 16  # room for "The answer is B." as well as a bare letter


@dataclass(frozen=True)
class Outcome:
    ms: float
    status: int  # 0: no HTTP answer (see error)
    document: dict[str, Any] | None
    retry_after: str | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == 200 and self.document is not None


def failures(outcomes: list[Outcome]) -> list[str]:
    """One entry per request that got no 200 document: its transport error or its status."""
    return [o.error or f"HTTP {o.status}" for o in outcomes if not o.ok]


def encode(spec: Spec) -> bytes:
    return json.dumps(spec.body()).encode()


def _outcome(started: float, response: httpx.Response) -> Outcome:
    ms = (time.perf_counter() - started) * 1000
    try:
        document = response.json()
    except ValueError:
        document = None
    return Outcome(ms, response.status_code, document, response.headers.get("retry-after"))


def post(client: httpx.Client, path: str, body: bytes) -> Outcome:
    started = time.perf_counter()
    try:
        response = client.post(path, content=body, headers=JSON_HEADERS)
    except httpx.TimeoutException:
        return Outcome((time.perf_counter() - started) * 1000, 0, None, error="timeout")
    return _outcome(started, response)


async def post_async(client: httpx.AsyncClient, path: str, body: bytes) -> Outcome:
    started = time.perf_counter()
    try:
        response = await client.post(path, content=body, headers=JSON_HEADERS)
    except httpx.TimeoutException:
        return Outcome((time.perf_counter() - started) * 1000, 0, None, error="timeout")
    except httpx.TransportError as error:
        return Outcome((time.perf_counter() - started) * 1000, 0, None, error=type(error).__name__)
    return _outcome(started, response)


def sequential(url: str, bodies: list[bytes], path: str = "/invocations") -> list[Outcome]:
    with httpx.Client(base_url=url, timeout=TIMEOUT) as client:
        return [post(client, path, body) for body in bodies]


def closed_loop(url: str, clients: int, bodies: list[bytes], path: str = "/invocations") -> tuple[float, list[Outcome]]:
    """`clients` workers share the bodies; each sends its next one when its previous one is answered.
    Outcomes in the bodies' order."""
    pending = list(reversed(range(len(bodies))))
    return _workers(url, [pending] * clients, bodies, path)


def per_client(url: str, streams: list[list[bytes]], path: str = "/invocations") -> tuple[float, list[Outcome]]:
    """One client per stream, all at once; each sends its own bodies one after another (a ticket's questions).
    Outcomes in the streams' order, stream after stream."""
    bodies = [body for stream in streams for body in stream]
    starts = [sum(len(stream) for stream in streams[:index]) for index in range(len(streams))]
    queues = [list(reversed(range(start, start + len(stream)))) for start, stream in zip(starts, streams, strict=True)]
    return _workers(url, queues, bodies, path)


def _workers(url: str, queues: list[list[int]], bodies: list[bytes], path: str) -> tuple[float, list[Outcome]]:
    """One closed-loop client per queue of body indexes (clients may share a queue), one connection each."""

    async def run() -> tuple[float, list[Outcome]]:
        outcomes: list[Outcome | None] = [None] * len(bodies)
        limits = httpx.Limits(max_connections=len(queues), max_keepalive_connections=len(queues))
        async with httpx.AsyncClient(base_url=url, timeout=TIMEOUT, limits=limits) as client:

            async def worker(queue: list[int]) -> None:
                while queue:
                    index = queue.pop()
                    outcomes[index] = await post_async(client, path, bodies[index])

            started = time.perf_counter()
            await asyncio.gather(*(worker(queue) for queue in queues))
            wall = time.perf_counter() - started
        return wall, [outcome for outcome in outcomes if outcome is not None]

    return asyncio.run(run())


def burst(url: str, bodies: list[bytes]) -> tuple[float, list[Outcome]]:
    """All bodies at once, one connection each: what a queue bound is for."""

    async def run() -> tuple[float, list[Outcome]]:
        limits = httpx.Limits(max_connections=len(bodies), max_keepalive_connections=len(bodies))
        async with httpx.AsyncClient(base_url=url, timeout=TIMEOUT, limits=limits) as client:
            started = time.perf_counter()
            outcomes = await asyncio.gather(*(post_async(client, "/invocations", body) for body in bodies))
            return time.perf_counter() - started, list(outcomes)

    return asyncio.run(run())


# -- the chat path ------------------------------------------------------------------------------------
def chat_body(spec: Spec) -> bytes:
    """The same system text and user message the adapter's template wraps, as chat messages."""
    question = DecisionRequest.model_validate(spec.body()).to_question("letters")
    plan = letters_plan(ChatFrame(prefix="", suffix=""), question)
    user = plan.text(0)
    return json.dumps({"messages": [{"role": "system", "content": LETTERS_SYSTEM_TEXT},
                                    {"role": "user", "content": user}],
                       "max_tokens": CHAT_MAX_TOKENS, "temperature": 0}).encode()


_LEADING_LETTER = re.compile(r"^\W*([A-P])(?![A-Za-z])")
_NAMED_LETTER = re.compile(r"(?:answer|option|letter)\W+(?:is\W+)?([A-P])(?![A-Za-z])", re.IGNORECASE)


def parse_choice(answer: str, options: int) -> int | None:
    """The option a text answer names: a leading letter, "answer/option/letter X", or exactly one description."""
    for pattern in (_LEADING_LETTER, _NAMED_LETTER):
        match = pattern.search(answer.strip())
        if match and SLOT_LETTERS.index(match.group(1)) < options:
            return SLOT_LETTERS.index(match.group(1))
    named = [index for index, option in enumerate(option_list(options))
             if option["description"].lower() in answer.lower()]
    return named[0] if len(named) == 1 else None


def chat_answer(outcome: Outcome) -> str | None:
    if not outcome.ok or outcome.document is None:
        return None
    try:
        return str(outcome.document["choices"][0]["message"]["content"])
    except (KeyError, IndexError, TypeError):
        return None
