"""Property-based checks of the request schema (hypothesis): in-process, and over HTTP on the real adapter.

Three generators: valid documents (any Unicode, any JSON state, 2-16 unique
options, any positive finite temperature), mutations of valid documents (a
node replaced by another JSON value, deleted, or joined by an unknown key), and
hostile bytes (truncations, injected bytes, NaN, duplicate keys, deep nesting).
Properties: validation raises nothing but `RequestError`; accepted documents
round-trip unchanged; over HTTP nothing gets a 5xx, every error is the JSON
envelope, and every 200 is strict JSON holding a probability distribution.
Runs are derandomized (the same examples every time) and bounded in count.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable
from typing import Any

import httpx
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from semif_adapter.doors.request_schema import MAX_ID_CHARS, MAX_OPTIONS, MIN_OPTIONS, RequestError, parse_request

UTF8_TEXT = st.characters(codec="utf-8")  # every code point but lone surrogates (those are refused, tested apart)
LEAVES = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
          | st.text(UTF8_TEXT, max_size=12))
JSON_VALUES = st.recursive(LEAVES, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(UTF8_TEXT, max_size=8), inner, max_size=4), max_leaves=16)
TEMPERATURES = st.floats(min_value=0, exclude_min=True, allow_nan=False, allow_infinity=False)
ERROR_STATUSES = frozenset({400, 413, 415})


@st.composite
def valid_documents(draw: st.DrawFn, max_options: int = MAX_OPTIONS, max_text: int = 40) -> dict[str, Any]:
    """A request the schema must accept (at most `max_options` options, texts of at most `max_text`)."""
    text = st.text(UTF8_TEXT, min_size=1, max_size=max_text)
    ids = draw(st.lists(st.text(UTF8_TEXT, min_size=1, max_size=16), min_size=MIN_OPTIONS, max_size=max_options,
                        unique=True))
    state = draw(text | st.dictionaries(st.text(UTF8_TEXT, max_size=8), JSON_VALUES, min_size=1, max_size=4)
                 | st.lists(JSON_VALUES, min_size=1, max_size=4))
    document: dict[str, Any] = {"decision": {
        "id": draw(st.text(UTF8_TEXT, min_size=1, max_size=MAX_ID_CHARS)), "state": state, "question": draw(text),
        "options": [{"id": option_id, "description": draw(text)} for option_id in ids]}}
    if draw(st.booleans()):
        document["temperature"] = draw(TEMPERATURES | st.integers(min_value=1, max_value=1000))
    scoring = draw(st.sampled_from([None, "letters", "likelihood", "pmi"]))
    if scoring is not None:
        document["scoring"] = scoring
    if draw(st.booleans()):
        letters = scoring in (None, "letters")
        document["debias"] = "permute" if letters and len(ids) <= 3 and draw(st.booleans()) else "none"
    return document


def _nodes(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into a JSON document (the root included)."""
    found = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _nodes(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _nodes(item, (*path, index))
    return found


@st.composite
def mutated_documents(draw: st.DrawFn) -> Any:
    """A valid document with one node replaced, deleted, or given an unknown sibling key."""
    return mutate(draw, draw(valid_documents(max_options=MAX_OPTIONS + 2)))


def mutate(draw: st.DrawFn, document: Any) -> Any:
    """`document` (any contract's) with one node replaced, deleted, or given an unknown sibling key."""
    path = draw(st.sampled_from(_nodes(document)))
    if not path:
        return draw(JSON_VALUES)
    parent = document
    for step in path[:-1]:
        parent = parent[step]
    action = draw(st.sampled_from(["replace", "delete", "add"]))
    if action == "replace":
        parent[path[-1]] = draw(JSON_VALUES)
    elif action == "delete":
        del parent[path[-1]]
    elif isinstance(parent, dict):
        parent[draw(st.text(UTF8_TEXT, min_size=1, max_size=8))] = draw(JSON_VALUES)
    else:
        parent.append(draw(JSON_VALUES))
    return document


@st.composite
def hostile_bytes(draw: st.DrawFn) -> bytes:
    """Bytes that are almost a request: cut, spliced, NaN'd, duplicated, nested deep, or just noise."""
    raw = json.dumps(draw(valid_documents(max_options=4)), ensure_ascii=draw(st.booleans())).encode()
    edit = draw(st.sampled_from(["noise", "truncate", "splice", "constant", "duplicate", "nest"]))
    if edit in DAMAGE:
        return damaged(draw, raw, edit)
    if edit == "constant":
        literal = draw(st.sampled_from([b"NaN", b"Infinity", b"-Infinity", b"1e999", b"-0", b"1e-400"]))
        return raw.replace(b'{"decision"', b'{"temperature": ' + literal + b', "decision"', 1)
    if edit == "duplicate":
        key = draw(st.sampled_from([b'"decision"', b'"id"', b'"options"', b'"description"']))
        return raw.replace(key + b":", key + b": 1, " + key + b":", 1)
    depth = draw(st.integers(60, 5000))
    return raw.replace(b'{"decision"', b'{"x": ' + b"[" * depth + b"]" * depth + b', "decision"', 1)


DAMAGE = ("noise", "truncate", "splice")


def damaged(draw: st.DrawFn, raw: bytes, edit: str) -> bytes:
    """Any contract's body as bytes gone wrong: replaced by noise, cut short, or with a few bytes spliced in."""
    if edit == "noise":
        return draw(st.binary(max_size=256))
    if edit == "truncate":
        return raw[:draw(st.integers(0, len(raw) - 1))]
    at = draw(st.integers(0, len(raw)))
    return raw[:at] + draw(st.binary(min_size=1, max_size=8)) + raw[at:]


def strict_json(body: bytes) -> Any:
    """Parse as a strict client would: NaN and Infinity are not JSON."""
    def refuse(name: str) -> None:
        raise ValueError(f"{name} in a response")

    return json.loads(body, parse_constant=refuse)


def expected_dump(document: dict[str, Any]) -> dict[str, Any]:
    """What an accepted document must read back as: itself, with the defaults filled in."""
    expected = {"temperature": 1.0, "debias": "none", "scoring": None, **document}
    expected["temperature"] = float(expected["temperature"])
    return expected


def bounded_settings(max_examples: int, shrink: bool) -> settings:
    phases = (Phase.explicit, Phase.generate, Phase.shrink) if shrink else (Phase.explicit, Phase.generate)
    return settings(max_examples=max_examples, deadline=None, derandomize=True, database=None, phases=phases,
                    suppress_health_check=list(HealthCheck), print_blob=True)


def check_validation(max_examples: int) -> Counter[str]:
    """In-process: the three generators against `parse_request`; raises on the first counterexample."""
    tried: Counter[str] = Counter()

    @bounded_settings(max_examples, shrink=True)
    @given(st.data())
    def properties(data: st.DataObject) -> None:
        kind = data.draw(st.sampled_from(["valid", "mutated", "bytes"]))
        tried[kind] += 1
        if kind == "valid":
            document = data.draw(valid_documents())
            parsed = parse_request(json.dumps(document).encode())
            dumped = parsed.model_dump(mode="json")
            assert dumped == expected_dump(document)
            assert parse_request(json.dumps(dumped).encode()) == parsed
            return
        raw = json.dumps(data.draw(mutated_documents())).encode() if kind == "mutated" else data.draw(hostile_bytes())
        try:
            parse_request(raw)
        except RequestError as error:
            assert error.code and error.message and 400 <= error.status < 500

    properties()
    return tried


def answer_problem(sent: Any, response: httpx.Response, document: Any) -> str | None:
    """Why an HTTP answer (its strict JSON `document`) to a generated body breaks the contract, or None."""
    status = response.status_code
    if status in ERROR_STATUSES:
        error = document.get("error") if isinstance(document, dict) else None
        if not isinstance(error, dict) or not error.get("code") or not error.get("message"):
            return f"{status} without the JSON error envelope"
        return None
    if status != 200:
        return f"status {status}: {response.text[:300]}"
    probabilities = document.get("probabilities", [])
    if not isinstance(sent, dict) or document.get("decision_id") != sent["decision"]["id"]:
        return "200 that does not echo the decision id"
    if len(probabilities) != len(sent["decision"]["options"]) or not all(math.isfinite(p) for p in probabilities) \
            or abs(math.fsum(probabilities) - 1) > 1e-6:
        return f"200 whose probabilities are not a distribution: {probabilities}"
    return None


def check_http(max_examples: int, post: Callable[[bytes], httpx.Response]) -> Counter[str]:
    """Over HTTP: small valid documents, mutations and hostile bytes; raises on the first broken answer.

    Valid documents are kept small (2-4 options, short texts) so each decode is cheap; no shrinking,
    so a failure costs one example, not hundreds of decodes.
    """
    return over_http(max_examples, post, {"valid": valid_documents(max_options=4, max_text=24),
                                          "mutated": mutated_documents(), "bytes": hostile_bytes()}, answer_problem)


def over_http(max_examples: int, post: Callable[[bytes], httpx.Response],
              generators: dict[str, st.SearchStrategy[Any]],
              problem_of: Callable[[Any, httpx.Response, Any], str | None]) -> Counter[str]:
    """Post what each generator ("valid" among them) draws and check each answer, which must be strict JSON, with
    `problem_of`; a valid body must get a 200. Raises on the first broken answer; returns how many of each kind got
    each status."""
    tried: Counter[str] = Counter()

    @bounded_settings(max_examples, shrink=False)
    @given(st.data())
    def run(data: st.DataObject) -> None:
        kind = data.draw(st.sampled_from(list(generators)))  # in the order given: the same examples every run
        sent: Any = data.draw(generators[kind])
        raw = sent if isinstance(sent, bytes) else json.dumps(sent).encode()
        response = post(raw)
        tried[f"{kind} -> {response.status_code}"] += 1
        try:
            problem = problem_of(sent, response, strict_json(response.content))
        except ValueError as error:
            problem = f"{response.status_code} with a body that is not strict JSON: {error}"
        if kind == "valid" and response.status_code != 200:
            problem = f"a valid request got {response.status_code}: {response.text[:300]}"
        assert problem is None, f"{problem}\nsent: {raw[:500]!r}"

    run()
    return tried
