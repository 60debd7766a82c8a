"""Hand-picked hostile inputs, by category, each with the one answer the adapter owes it.

Every case names its expected status and JSON error code (a 200 must answer the
request that was sent). A case fails on any other answer, on a non-JSON error
body, or if the adapter stops serving afterwards. Huge cases also watch the
adapter's memory: a refused request must not leave its input behind.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import httpx

from scripts.local.processes import wait_until

from . import rawhttp
from .bodies import OPTIONS, REQUEST_TIMEOUT_S, decision, error_code, post_json
from .load import check_answer
from .servers import Server

LIMIT = 6 * 1024 * 1024  # the adapter's body limit: SageMaker's real-time payload limit
NEAR_LIMIT = LIMIT - 4096  # room for the envelope around a huge string
MAX_HUGE_RSS_GROWTH = 0.05  # after the first huge input, the next ones may not grow the adapter further


@dataclass(frozen=True)
class Case:
    category: str
    name: str
    body: bytes
    status: int
    code: str | None = None  # None for a 200
    content_type: str = "application/json"
    sent: dict[str, Any] | None = None  # the document, when a 200 must answer it

    @property
    def expected(self) -> str:
        """The answer owed, as the report shows it: "413 prompt_too_long", "200"."""
        return f"{self.status} {self.code or ''}".strip()


@dataclass
class CaseResult:
    category: str
    name: str
    expected: str
    got: str
    seconds: float
    problem: str | None = None


@dataclass
class CatalogResult:
    results: list[CaseResult] = field(default_factory=list)
    rss_kib: dict[str, int | None] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def per_category(self) -> dict[str, int]:
        return dict(Counter(r.category for r in self.results))

    def case_problems(self) -> list[str]:
        """One line per case that did not get its answer."""
        return [f"{r.category}/{r.name}: {r.problem}" for r in self.results if r.problem]

    def summary(self) -> dict[str, Any]:
        return {"tried": len(self.results), "per_category": self.per_category(), "rss_kib": self.rss_kib,
                "slowest_s": max((r.seconds for r in self.results), default=0.0),
                "cases": [asdict(r) for r in self.results], "problems": self.problems}


def _doc(document: dict[str, Any], ascii_only: bool = False) -> bytes:
    return json.dumps(document, ensure_ascii=ascii_only).encode("utf-8")


def _ok(category: str, name: str, document: dict[str, Any], ascii_only: bool = False) -> Case:
    return Case(category, name, _doc(document, ascii_only), 200, sent=document)


def _edit(change: Callable[[dict[str, Any]], None], **base: Any) -> dict[str, Any]:
    document = decision(**base)
    change(document)
    return document


def _nest(depth: int, leaf: object = "leaf") -> object:
    for _ in range(depth):
        leaf = {"k": leaf}
    return leaf


def _huge(text_room: int, tag: str) -> str:
    """A distinct huge text (distinct per tag: a cache must not make the second one free)."""
    return (f"{tag} " + "evidence " * (text_room // 9))[:text_room]


def unicode_cases() -> Iterator[Case]:
    texts = {
        "astral": "Ship \U0001F680 to \U0001D518\U0001D52B\U0001D526 \U00020B9F\U0002A6B2, then \U0001F600",
        "rtl": "\u202e" + "".join(map(chr, (0x627, 0x644, 0x641, 0x627, 0x62A, 0x648, 0x631, 0x629))) + "\u202c "
               "\u05d7\u05e9\u05d1\u05d5\u05df \u200f overdue",
        "combining": "e" + "\u0301\u0302\u0303\u0304" * 10 + " zalgo t\u0336e\u0336x\u0336t",
        "nul": "before\u0000after \u0000",
        "noncharacters_bom": "\ufeff\uffff\U0010ffff\ufffe text",
    }
    for name, text in texts.items():
        yield _ok("unicode", name, decision(f"id-{text[:20]}", text, f"Which fits {text[:12]}?",
                                            [(f"{text[:8]}-a", text[:24]), (f"{text[:8]}-b", "plain")]))
    yield Case("unicode", "lone_surrogate", _doc(decision(state="bad \ud800 text"), ascii_only=True), 400,
               "invalid_text")
    valid = _doc(decision(state="MARKER"))
    yield Case("unicode", "invalid_utf8", valid.replace(b"MARKER", b"\xff\xfe\xc0\xaf"), 400, "invalid_json")
    yield _ok("unicode", "same_id_after_normalisation", decision(options=[("\u00e9", "one"), ("e\u0301", "two")]))


def huge_string_cases() -> Iterator[Case]:
    room = NEAR_LIMIT
    yield Case("huge_strings", "state", _doc(decision(state=_huge(room, "state"))), 413, "prompt_too_long")
    yield Case("huge_strings", "question", _doc(decision(question=_huge(room, "question"))), 413, "prompt_too_long")
    yield Case("huge_strings", "option_description",
               _doc(decision(options=[("a", _huge(room, "option")), ("b", "b")])), 413, "prompt_too_long")
    yield Case("huge_strings", "option_id", _doc(decision(options=[(_huge(room, "id"), "a"), ("b", "b")])),
               400, "invalid_request")
    yield Case("huge_strings", "decision_id", _doc(decision(_huge(room, "decision"))), 400, "invalid_request")
    many = {f"key{i:06d}": i for i in range(room // 24)}
    yield Case("huge_strings", "state_with_many_keys", _doc(decision(state=many)), 413, "prompt_too_long")


def nesting_cases() -> Iterator[Case]:
    yield _ok("deep_nesting", "state_40_levels", decision(state=_nest(40)))
    yield Case("deep_nesting", "state_100_levels", _doc(decision(state=_nest(100))), 400, "too_deep")
    arrays = b"[" * 100_000 + b"]" * 100_000
    yield Case("deep_nesting", "state_100000_arrays", _doc(decision(state="X")).replace(b'"X"', arrays), 400,
               "too_deep")
    yield Case("deep_nesting", "temperature_100000_arrays",
               _doc(decision(temperature="X")).replace(b'"X"', arrays), 400, "too_deep")
    yield Case("deep_nesting", "unclosed_100000_objects", b'{"decision": ' + b'{"k": ' * 100_000, 400, "too_deep")


def nan_cases() -> Iterator[Case]:
    base = _doc(decision(temperature="X"))
    for literal in ("NaN", "Infinity", "-Infinity", "1e999", "-1e999"):
        yield Case("nan_infinity", f"temperature_{literal}", base.replace(b'"X"', literal.encode()), 400,
                   "invalid_json")
    yield Case("nan_infinity", "state_list_with_nan", _doc(decision(state="X")).replace(b'"X"', b"[1, NaN]"),
               400, "invalid_json")
    yield Case("nan_infinity", "state_object_with_1e999",
               _doc(decision(state="X")).replace(b'"X"', b'{"a": {"b": 1e999}}'), 400, "invalid_json")
    yield Case("nan_infinity", "temperature_string_nan", _doc(decision(temperature="NaN")), 400, "invalid_request")
    yield Case("nan_infinity", "temperature_zero", _doc(decision(temperature=0)), 400, "invalid_request")
    yield Case("nan_infinity", "temperature_negative_zero", _doc(decision(temperature=-0.0)), 400,
               "invalid_request")
    yield _ok("nan_infinity", "temperature_smallest_subnormal", decision(temperature=5e-324))
    yield _ok("nan_infinity", "temperature_1e-300", decision(temperature=1e-300))
    yield _ok("nan_infinity", "temperature_largest_float", decision(temperature=1.7976931348623157e308))


def duplicate_key_cases() -> Iterator[Case]:
    valid = _doc(decision(state={"a": 1}))
    yield Case("duplicate_keys", "top_level", valid[:-1] + b', "decision": {}}', 400, "duplicate_key")
    yield Case("duplicate_keys", "decision_id", valid.replace(b'"id": "case-1"', b'"id": "x", "id": "y"'), 400,
               "duplicate_key")
    yield Case("duplicate_keys", "option_field",
               valid.replace(b'"description": "Send a reminder"', b'"description": "a", "description": "b"'),
               400, "duplicate_key")
    yield Case("duplicate_keys", "inside_state", valid.replace(b'{"a": 1}', b'{"a": 1, "a": 2}'), 400,
               "duplicate_key")
    yield Case("duplicate_keys", "option_ids", _doc(decision(options=[("x", "one"), ("x", "two")])), 400,
               "invalid_request")
    yield Case("duplicate_keys", "case_differs_is_an_unknown_field", valid.replace(b'{"id"', b'{"ID": "z", "id"', 1),
               400, "invalid_request")


def wrong_type_cases() -> Iterator[Case]:
    for name, raw in (("null", b"null"), ("number", b"42"), ("string", b'"decide"'), ("array", b"[]")):
        yield Case("wrong_types", f"body_{name}", raw, 400, "invalid_request")
    edits: dict[str, Callable[[dict[str, Any]], None]] = {
        "decision_null": lambda d: d.update(decision=None),
        "decision_list": lambda d: d.update(decision=[d["decision"]]),
        "options_object": lambda d: d["decision"].update(options={"a": "b"}),
        "option_string": lambda d: d["decision"]["options"].__setitem__(0, "remind"),
        "option_id_int": lambda d: d["decision"]["options"][0].update(id=1),
        "description_null": lambda d: d["decision"]["options"][0].update(description=None),
        "state_null": lambda d: d["decision"].update(state=None),
        "state_bool": lambda d: d["decision"].update(state=True),
        "state_number": lambda d: d["decision"].update(state=3.5),
        "question_list": lambda d: d["decision"].update(question=["why"]),
        "temperature_numeric_string": lambda d: d.update(temperature="0.5"),
        "temperature_bool": lambda d: d.update(temperature=True),
        "temperature_object": lambda d: d.update(temperature={"value": 1}),
        "debias_int": lambda d: d.update(debias=1),
        "debias_null": lambda d: d.update(debias=None),
        "unknown_field": lambda d: d.update(seed=7),
    }
    for name, change in edits.items():
        yield Case("wrong_types", name, _doc(_edit(change)), 400, "invalid_request")


def option_count_cases() -> Iterator[Case]:
    many = [(f"o{i}", f"choice number {i}") for i in range(17)]
    yield Case("too_many_options", "17_options", _doc(decision(options=many)), 400, "invalid_request")
    yield _ok("too_many_options", "16_options_is_the_limit", decision(options=many[:16]))
    yield Case("empty_options", "no_options", _doc(decision(options=[])), 400, "invalid_request")
    yield Case("empty_options", "one_option", _doc(decision(options=[OPTIONS[0]])), 400, "invalid_request")
    yield Case("empty_options", "options_missing", _doc(_edit(lambda d: d["decision"].pop("options"))), 400,
               "invalid_request")


def size_cases() -> Iterator[Case]:
    envelope = _doc(decision(state="X"))
    filler = LIMIT - (len(envelope) - 3)  # the three bytes of "X" become the filler's quotes and text
    text = (b"word " * (filler // 5 + 1))[: filler - 2]
    exact = envelope.replace(b'"X"', b'"' + text + b'"')
    yield Case("body_over_limit", "exactly_6_MiB_is_read", exact, 413, "prompt_too_long")
    over = exact.replace(b'"word', b'"words', 1)
    yield Case("body_over_limit", "6_MiB_plus_1", over, 413, "body_too_large")


def other_cases() -> Iterator[Case]:
    valid = decision()
    yield Case("media_type", "text_plain", _doc(valid), 415, "unsupported_media_type", content_type="text/plain")
    yield Case("media_type", "missing", _doc(valid), 415, "unsupported_media_type", content_type="")
    yield Case("media_type", "json_with_charset", _doc(valid), 200, content_type="application/json; charset=utf-8",
               sent=valid)
    yield Case("media_type", "empty_body", b"", 400, "invalid_json")
    yield Case("media_type", "binary", bytes(range(256)) * 4, 400, "invalid_json")
    yield Case("truncated_bodies", "json_cut_in_half", _doc(valid)[: len(_doc(valid)) // 2], 400, "invalid_json")


def catalog() -> list[Case]:
    """Every hand-picked case, grouped by category."""
    groups = (unicode_cases, huge_string_cases, nesting_cases, nan_cases, duplicate_key_cases, wrong_type_cases,
              option_count_cases, size_cases, other_cases)
    return [case for group in groups for case in group()]


def judge_response(case: Case, response: httpx.Response) -> str | None:
    """Why `response` is not what `case` is owed, or None."""
    if response.status_code != case.status:
        return f"expected {case.expected}, got {response.status_code}: {response.text[:200]}"
    if case.status == 200:
        return check_answer(response, case.sent) if case.sent is not None else None
    if not response.headers.get("content-type", "").startswith("application/json"):
        return "error body is not JSON"
    try:
        error = response.json()["error"]
        code, message = error["code"], error["message"]
    except (ValueError, KeyError, TypeError):
        return f"error body is not the JSON error envelope: {response.text[:200]}"
    if code != case.code or not message:
        return f"expected code {case.code}, got {code}"
    return None


def run_catalog(server: Server, cases: list[Case]) -> CatalogResult:
    """Send each case once; check the answer, that the adapter still serves, and its memory after huge inputs."""
    result = CatalogResult()
    result.rss_kib["before"] = server.rss_kib()
    with httpx.Client(timeout=REQUEST_TIMEOUT_S) as client:
        for case in cases:
            headers = {"content-type": case.content_type} if case.content_type else {}
            started = time.monotonic()
            try:
                response = client.post(f"{server.url}/invocations", content=case.body, headers=headers)
                problem, got = judge_response(case, response), str(response.status_code)
            except httpx.HTTPError as error:
                problem, got = f"no answer: {type(error).__name__}", "no answer"
            result.results.append(CaseResult(case.category, case.name, case.expected, got,
                                             round(time.monotonic() - started, 2), problem))
            if case.category == "huge_strings":
                result.rss_kib["after_huge_strings"] = server.rss_kib()
        result.rss_kib["after"] = server.rss_kib()
        still = post_json(client, server.url, decision())
    result.problems = result.case_problems()
    if still.status_code != 200:
        result.problems.append(f"the adapter stopped serving: {still.status_code}")
    return result


def huge_input_memory(server: Server, rounds: int) -> dict[str, Any]:
    """VmRSS after each of `rounds` distinct near-6 MB states (each refused with 413 prompt_too_long).

    The first one raises the allocator's high-water mark; the later ones must not raise it further, or the
    adapter keeps refused inputs (a leak that grows with every hostile request, not with traffic).
    """
    after: list[int | None] = []
    with httpx.Client(timeout=REQUEST_TIMEOUT_S) as client:
        before = server.rss_kib()
        for number in range(rounds):
            response = post_json(client, server.url, decision(state=_huge(NEAR_LIMIT, f"round-{number}")))
            after.append(server.rss_kib() if response.status_code == 413 else None)
    problems = []
    if None in after or not after:
        problems.append(f"a huge state was not refused with 413, or the adapter is gone: {after}")
    elif max(after[1:], default=after[0]) > after[0] * (1 + MAX_HUGE_RSS_GROWTH):
        problems.append(f"refused huge inputs stay resident: RSS {after} KiB after each "
                        f"(more than {MAX_HUGE_RSS_GROWTH:.0%} above the first)")
    return {"rounds": rounds, "before_kib": before, "after_each_kib": after, "problems": problems}


def _raw_expect(url: str, data: bytes, status: int, code: str) -> str | None:
    with rawhttp.connect(url) as sock:
        sock.sendall(data)
        response = rawhttp.read_response(sock, REQUEST_TIMEOUT_S)
    if response is None:
        return f"no answer (expected {status} {code})"
    if (response.status, response.error_code()) != (status, code):
        return f"expected {status} {code}, got {response.status} {response.error_code()}"
    return None


def run_raw_cases(server: Server) -> CatalogResult:
    """Framing abuse a client library will not send: lying lengths, chunked floods, early goodbyes."""
    result = CatalogResult()
    url = server.url
    body = _doc(decision("truncated-on-the-wire"))
    disconnects_before = _disconnect_lines(server)

    def chunked_flood() -> Iterator[bytes]:
        for _ in range(LIMIT // 65536 + 1):
            yield b"x" * 65536

    checks: dict[tuple[str, str], Callable[[], str | None]] = {
        ("body_over_limit", "declared_6_MiB_plus_1_nothing_sent"): lambda: _raw_expect(
            url, rawhttp.request_head(url, "/invocations", LIMIT + 1), 413, "body_too_large"),
        ("body_over_limit", "chunked_without_length_over_6_MiB"): lambda: _expect_httpx(
            url, chunked_flood(), 413, "body_too_large"),
        ("truncated_bodies", "length_larger_than_sent_then_close"): lambda: rawhttp.send_and_close(
            url, rawhttp.request_head(url, "/invocations", len(body) + 500) + body, linger_s=0.2),
        ("truncated_bodies", "length_smaller_than_sent"): lambda: _raw_expect(
            url, rawhttp.request_head(url, "/invocations", len(body) - 10) + body, 400, "invalid_json"),
    }
    for (category, name), check in checks.items():
        started = time.monotonic()
        problem = check()
        result.results.append(CaseResult(category, name, "see name", "ok" if problem is None else "failed",
                                         round(time.monotonic() - started, 2), problem))
    result.problems = result.case_problems()
    try:
        wait_until(lambda: _disconnect_lines(server) > disconnects_before, timeout_s=10.0, what="disconnect log")
    except TimeoutError:
        result.problems.append("the adapter did not log the truncated request as a client disconnect")
    with httpx.Client(timeout=REQUEST_TIMEOUT_S) as client:
        if post_json(client, url, decision()).status_code != 200:
            result.problems.append("the adapter stopped serving after the framing cases")
    return result


def _expect_httpx(url: str, content: Iterator[bytes], status: int, code: str) -> str | None:
    try:
        response = httpx.post(f"{url}/invocations", content=content, headers={"content-type": "application/json"},
                              timeout=REQUEST_TIMEOUT_S)
    except httpx.HTTPError as error:  # the server may answer and close before the flood is sent
        return f"no answer: {type(error).__name__}"
    if response.status_code != status or error_code(response) != code:
        return f"expected {status} {code}, got {response.status_code} {response.text[:200]}"
    return None


def _disconnect_lines(server: Server) -> int:
    return sum(1 for line in server.log_lines() if line.get("client_disconnected"))
