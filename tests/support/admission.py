"""Requests on raw sockets, and the barrier after which an adapter has surely read and admitted them.

Tests that signal or probe an adapter while work is in it (SIGTERM, a full queue) must know that work was admitted
first, and neither a pause nor a single /ping says so on a busy machine. A request whose bytes are already in the
adapter's socket buffer is read, parsed and admitted on its event loop within a handful of loop iterations that wait
on no I/O (the body is read by a task of its own under `asyncio.wait_for`, then `decide_all` runs as another task:
about five iterations). A /ping sent on a new connection takes about as many: the accept runs as a task, the
transport registers its reader one iteration later, the request is read on the next and answered by a task after
that. So when the adapter's loop was starved while a client sent its requests and then a /ping, it finds all of them
in one iteration, and that /ping can be answered an iteration before the last request is admitted. Pings in a row
cannot: each next one is only sent after the previous answer, and accepted, read and answered iterations later, so
three outlast admission whatever the machine's speed.
"""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

import httpx

from bench.reliability.rawhttp import connect

BARRIER_PINGS = 3
PING_TIMEOUT_S = 10.0  # a barrier, not the 2-s ping contract (test_contract checks that one)
# The SIGTERM tests' adapter (and image): the shipped drain, one decode thread (so one worker), 64-token ubatches.
# Their deadlines are the drain and SageMaker's SIGKILL; what must fit in them is one short decision before the
# drain deadline and, after it, one ubatch (an abort takes effect between ubatches) and the exit. Threads of one
# decode meet at a barrier after every graph node, so with more runnable threads than cores a two-thread decode
# waits out a scheduler slice at each one: beside six busy loops on 2 cores a one-sentence decision took 2-10 s on
# two threads, 0.3 s on one; a default 512-token ubatch took 7 s to abort on a busy machine, one of 64 about 1 s.
DRAIN_TIMING = {"SM_LLAMA_CPP_THREADS": "1", "SM_LLAMA_CPP_UBATCH_SIZE": "64"}


def send(url: str, body: bytes, path: str = "/invocations", *, content_type: str = "application/json",
         timeout_s: float = 60.0) -> socket.socket:
    """A POST written in full on a new connection; read the answer with `rawhttp.read_response`."""
    sock = connect(url, timeout_s=timeout_s)
    head = [f"POST {path} HTTP/1.1", f"Host: {urlsplit(url).netloc}", f"Content-Type: {content_type}",
            f"Content-Length: {len(body)}"]
    sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)
    return sock


def wait_admitted(url: str) -> None:
    """Returns once every request whose bytes were sent before the call has been admitted by the adapter at `url`
    (or refused, if it was refused at admission)."""
    for _ in range(BARRIER_PINGS):
        assert httpx.get(url + "/ping", timeout=PING_TIMEOUT_S).status_code == 200
