"""Clients that leave mid-request: the adapter must lose no admission slot and keep its KV cache right.

A decision whose client left still runs to its end on the worker (its slot frees
when the work ends, not when the client goes), so the proof is behavioural:
after clients walk away while their decision decodes and while it waits in the
queue, a burst as large as the queue is admitted in full (no slot leaked), and
a fixed request sequence gets the same bits as it did before the disconnects,
with the probe's state restored from the host-memory prefix cache and then
reused from the KV cache (the caches hold what they should, nothing else).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from scripts.local.processes import wait_until

from . import rawhttp
from .bodies import REQUEST_TIMEOUT_S, decision, post_json
from .servers import Server

LOG_WAIT_S = 120.0
OTHER_STATE = "Warehouse note: the forklift charger in bay 3 trips its breaker every night."
PROBE_STATE = "Order 9120: paid twice by card; the customer asks for one payment back."
LONG_STATE = "Audit trail: " + " ".join(f"entry {i} approved by clerk {i % 7}." for i in range(80))


def _walk_away(url: str, body: dict[str, Any], linger_s: float) -> None:
    data = json.dumps(body).encode()
    rawhttp.send_and_close(url, rawhttp.request_head(url, "/invocations", len(data)) + data, linger_s=linger_s)


def _post_alone(url: str, body: dict[str, Any]) -> int:
    with httpx.Client(timeout=REQUEST_TIMEOUT_S) as client:
        return post_json(client, url, body).status_code


def _sequence(client: httpx.Client, url: str) -> list[dict[str, Any]]:
    """Another state, then the probe twice: the probe's cache hits are fixed by this order alone."""
    post_json(client, url, decision("other", OTHER_STATE)).raise_for_status()
    answers = []
    for number in range(2):
        response = post_json(client, url, decision(f"probe-{number}", PROBE_STATE))
        response.raise_for_status()
        answers.append(response.json())
    return answers


def _logged_statuses(server: Server, ids: set[str]) -> dict[str, int]:
    return {line["decision_id"]: line["status"] for line in server.log_lines()
            if line.get("decision_id") in ids and "status" in line}


def _burst(url: str, size: int) -> Counter[int]:
    """`size` requests at once (the queue's size): all are admitted only if no slot leaked."""
    bodies = [decision(f"burst-{number}", OTHER_STATE) for number in range(size)]
    with ThreadPoolExecutor(max_workers=size) as pool:
        return Counter(pool.map(lambda body: _post_alone(url, body), bodies))


def run_disconnects(server: Server, queued: int = 4) -> dict[str, Any]:
    """Walk away once mid-decode and `queued` times while waiting; then check slots and the KV cache."""
    url = server.url
    ready = server.ready_fields()
    queue_size, head_tokens = int(ready["queue_size"]), int(ready["head_tokens"][ready["default_scoring"]])
    problems: list[str] = []
    with httpx.Client(timeout=REQUEST_TIMEOUT_S) as client:
        before = _sequence(client, url)
        ids = {"left-mid-decode"} | {f"left-queued-{n}" for n in range(queued)}
        _walk_away(url, decision("left-mid-decode", LONG_STATE), linger_s=0.3)
        # A client that stays, queued behind the one that left mid-decode; the next ones leave while queued.
        blocker = threading.Thread(target=_post_alone, args=(url, decision("blocker", LONG_STATE)))
        blocker.start()
        time.sleep(0.2)
        for number in range(queued):
            _walk_away(url, decision(f"left-queued-{number}", f"{PROBE_STATE} Variant {number}."), linger_s=0.1)
        blocker.join(REQUEST_TIMEOUT_S)
        with contextlib.suppress(TimeoutError):
            wait_until(lambda: len(_logged_statuses(server, ids)) >= len(ids), timeout_s=LOG_WAIT_S,
                       what="the log lines of the requests whose clients left", interval_s=0.2)
        left = _logged_statuses(server, ids)
        if len(left) < len(ids):
            problems.append(f"requests whose clients left never finished: {sorted(ids - set(left))}")
        burst = _burst(url, queue_size)
        if set(burst) != {200}:
            problems.append(f"a burst of {queue_size} (the queue size) after the disconnects got {dict(burst)}: "
                            "an admission slot leaked")
        after = _sequence(client, url)
    # Before: the probe's state is new (the head reused, and any opening it shares with the other state), then
    # held by the KV cache. After: restored from the host-memory cache, then held by the KV cache again: both
    # answers reuse what the second did before.
    timing = [[a["timing"]["cached_tokens"], a["timing"]["evaluated_tokens"], a["timing"]["cache_source"]]
              for a in after]
    held = [before[1]["timing"]["cached_tokens"], before[1]["timing"]["evaluated_tokens"]]
    expected = [[*held, "host"], [*held, "kv"]]
    if timing != expected:
        problems.append(f"(cached, evaluated, source) after the disconnects {timing}, expected {expected}")
    if not head_tokens <= before[0]["timing"]["cached_tokens"] < held[0]:  # (+ an opening shared with the other)
        problems.append(f"the probe after another state reused {before[0]['timing']['cached_tokens']} tokens, "
                        f"not the {head_tokens} of the constant head and less than its whole prefix ({held[0]})")
    if [a["probabilities"] for a in after] != [b["probabilities"] for b in before]:
        problems.append("the same requests gave other probabilities after the disconnects")
    return {"walked_away": len(ids), "their_logged_statuses": {str(k): v for k, v in Counter(left.values()).items()},
            "burst": {str(k): v for k, v in burst.items()}, "queue_size": queue_size,
            "cached_evaluated_before": [[b["timing"][key] for key in ("cached_tokens", "evaluated_tokens")]
                                        for b in before],
            "cached_evaluated_after": timing, "problems": problems}
