"""Bulk decisions on the real model: JSON Lines, several decisions per request, admission, drain, metrics."""

from __future__ import annotations

import json
import random
import select
import signal
import socket
import time
from pathlib import Path

import httpx
import jsonschema
from support.admission import send, wait_admitted

from bench.reliability.rawhttp import RawResponse, read_response
from scripts.local.processes import wait_until
from semif_adapter.core.metrics import NAMESPACE
from semif_adapter.core.worker_queues import reuse_order
from semif_adapter.doors.request_schema import DecisionRequest
from semif_adapter.engine.embedded_model import embedded_model_path
from semif_adapter.settings import SAGEMAKER_STOP_SECONDS

JSONL = {"content-type": "application/jsonlines"}
OPTIONS = [("billing", "Billing"), ("shipping", "Shipping"), ("technical", "Technical support")]
STATES = ["I was charged twice this month.", "My parcel is nine days late.", "The app crashes at login."]
QUESTIONS = ["Which team should handle this ticket?", "Is it urgent?"]
EMF_SCHEMA = json.loads((Path(__file__).parents[1] / "support" / "emf_schema.json").read_text())


def without_timing(answer: dict) -> dict:
    """An answer as far as it is the same whatever else ran: all but the timing (and where the prefix came from)."""
    return {key: value for key, value in answer.items() if key != "timing"}


def lines_of(response: httpx.Response) -> list[dict]:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/jsonlines")
    return [json.loads(line) for line in response.text.splitlines()]


def bodies(make_decision, scoring: str = "letters") -> list[dict]:
    return [make_decision(f"{s}-{q}", state=STATES[s], question=QUESTIONS[q], options=OPTIONS, scoring=scoring)
            for s in range(len(STATES)) for q in range(len(QUESTIONS))]


def test_json_lines_answers_are_the_single_answers_in_input_order(client, make_decision):
    requests = bodies(make_decision, "pmi") + bodies(make_decision, "letters")
    random.Random(7).shuffle(requests)  # states interleaved: the batch regroups them, only the speed changes
    singles = [client.post("/invocations", json=body).json() for body in requests]
    payload = "".join(json.dumps(body) + "\n" for body in requests)
    answers = lines_of(client.post("/invocations", content=payload, headers=JSONL))
    assert [without_timing(answer) for answer in answers] == [without_timing(single) for single in singles]
    # whichever worker ran a line, its whole prefix came from a cache (the one it held, or the host's)
    assert all(answer["timing"]["cache_source"] in ("kv", "host") for answer in answers)
    prefixes: dict[tuple[str, str], set[int]] = {}
    for body, answer, single in zip(requests, answers, singles, strict=True):
        assert answer["timing"]["evaluated_tokens"] <= single["timing"]["evaluated_tokens"]
        prefixes.setdefault((body["scoring"], body["decision"]["state"]), set()).add(answer["timing"]["cached_tokens"])
    assert all(len(cached) == 1 for cached in prefixes.values()), prefixes  # each line of a state: all of it


def test_a_batch_runs_grouped_by_method_then_state_then_criterion(make_decision):
    requests = [DecisionRequest.model_validate(body).to_question("pmi")
                for body in bodies(make_decision, "pmi") + bodies(make_decision)]
    random.Random(3).shuffle(requests)
    order = [requests[i] for i in reuse_order(requests)]
    keys = [(r.method.value, r.state) for r in order]
    runs = [key for index, key in enumerate(keys) if index == 0 or key != keys[index - 1]]
    assert len(runs) == len(set(runs)) == 2 * len(STATES)  # each method + state once, its lines together
    assert len([k for i, k in enumerate(runs) if i == 0 or k[0] != runs[i - 1][0]]) == 2  # each method together


def test_bad_lines_are_answered_in_place_and_the_rest_is_served(client, make_decision):
    good = make_decision("good", state=STATES[0], options=OPTIONS)
    payload = (json.dumps(good) + "\n\n{not json\n"
               + json.dumps(make_decision("one-option", options=OPTIONS[:1])) + "\r\n" + json.dumps(good))
    legacy = {"content-type": "application/x-jsonlines"}
    answers = lines_of(client.post("/invocations", content=payload, headers=legacy))
    assert len(answers) == 5
    assert answers[0]["decision_id"] == answers[4]["decision_id"] == "good"
    assert [a.get("line") for a in answers] == [None, 2, 3, 4, None]
    assert [a["error"]["code"] for a in answers[1:4]] == ["empty_line", "invalid_json", "invalid_request"]
    assert answers[3]["error"]["field"] == "decision.options"


def test_several_decisions_in_one_request_share_their_state(client, make_decision):
    items = [{"id": f"q{q}", "question": question, "options": [{"id": i, "description": d} for i, d in OPTIONS]}
             for q, question in enumerate(QUESTIONS)]
    answer = client.post("/invocations", json={"state": STATES[1], "decisions": items, "scoring": "likelihood"})
    assert answer.status_code == 200, answer.text
    many = answer.json()["decisions"]
    singles = [client.post("/invocations", json={"decision": {**item, "state": STATES[1]},
                                                  "scoring": "likelihood"}).json() for item in items]
    assert [without_timing(a) for a in many] == [without_timing(s) for s in singles]
    emptied = [items[0], {**items[1], "question": ""}]
    broken = client.post("/invocations", json={"state": STATES[1], "decisions": emptied})
    assert broken.status_code == 400 and broken.json()["error"]["field"] == "decisions[1].question"
    no_state = client.post("/invocations", json={"decisions": items})
    assert no_state.status_code == 400 and no_state.json()["error"]["field"] == "decisions[0].state"


def test_execution_parameters_follow_the_batch_transform_contract(client):
    response = client.get("/execution-parameters")
    assert response.status_code == 200
    assert response.json() == {"MaxConcurrentTransforms": 1, "BatchStrategy": "MULTI_RECORD", "MaxPayloadInMB": 1}


def long_batch(make_decision, count: int, tag: str) -> str:
    return "".join(json.dumps(make_decision(f"{tag}-{i}", state=f"{tag} ticket {i}: " + "the order is late. " * 20,
                                            options=OPTIONS)) + "\n" for i in range(count))


def raw_lines(response: RawResponse | None) -> list[dict]:
    assert response is not None, "no answer: the connection was cut"
    assert response.status == 200, response.body
    assert response.headers["content-type"].startswith("application/jsonlines")
    return [json.loads(line) for line in response.body.decode().splitlines()]


def batch_admitted(url: str, content: str) -> socket.socket:
    """A JSON Lines batch sent on a raw socket and admitted (`wait_admitted`); its answer is `read_response`'s."""
    sock = send(url, content.encode(), content_type=JSONL["content-type"])
    wait_admitted(url)
    return sock


def answered(sock: socket.socket) -> bool:
    """Whether an answer (or the server's close) has arrived on `sock`, without waiting."""
    return bool(select.select([sock], [], [], 0)[0])


def test_a_batch_counts_against_the_queue_by_its_decisions(start_adapter, make_decision):
    process = start_adapter({"SM_LLAMA_CPP_MODEL": str(embedded_model_path()), "SEMIF_QUEUE_SIZE": "4"})
    process.wait_ready()
    # 6 decisions: more than the queue holds, admitted because nothing else was
    batch = batch_admitted(process.url, long_batch(make_decision, 6, "big"))
    single = httpx.post(process.url + "/invocations", json=make_decision(), timeout=60)
    ping = httpx.get(process.url + "/ping", timeout=2)  # SageMaker's ping timeout
    assert single.status_code == 503 and single.json()["error"]["code"] == "queue_full"
    assert ping.status_code == 200
    # refused at once and pinged while the batch runs, not once it is done (6 decisions: seconds of decoding)
    assert not answered(batch)
    lines = raw_lines(read_response(batch, 300))
    batch.close()
    assert [line["decision_id"] for line in lines] == [f"big-{i}" for i in range(6)]
    assert httpx.post(process.url + "/invocations", json=make_decision(), timeout=60).status_code == 200


def test_sigterm_hands_back_the_lines_a_batch_could_not_finish(start_adapter, make_decision):
    process = start_adapter({"SM_LLAMA_CPP_MODEL": str(embedded_model_path()), "SEMIF_DRAIN_SECONDS": "2"})
    process.wait_ready()
    batch = batch_admitted(process.url, long_batch(make_decision, 40, "drain"))  # running
    stopped = time.monotonic()
    process.proc.send_signal(signal.SIGTERM)
    answers = raw_lines(read_response(batch, SAGEMAKER_STOP_SECONDS))  # due before SageMaker's SIGKILL
    batch.close()
    assert process.wait_exit(SAGEMAKER_STOP_SECONDS) == 0 and time.monotonic() - stopped < SAGEMAKER_STOP_SECONDS
    assert len(answers) == 40
    done = [a for a in answers if "decision_id" in a]
    handed_back = [a for a in answers if "error" in a]
    assert handed_back and all(a["error"]["code"] == "shutting_down" for a in handed_back)
    unfinished = [number for number, answer in enumerate(answers, 1) if "error" in answer]
    assert [a["line"] for a in handed_back] == unfinished and unfinished[-1] == 40  # each in its place, numbered
    # the rest of the batch, except that a line the second worker was on may finish after the first one's is cut
    assert len(done) == 40 - len(unfinished) and sum("decision_id" in a for a in answers[unfinished[0]:]) <= 1


def test_every_request_writes_emf_records_cloudwatch_can_parse(start_adapter, make_decision):
    process = start_adapter({"SM_LLAMA_CPP_MODEL": str(embedded_model_path()), "SEMIF_ENDPOINT_NAME": "semif-x"})
    process.wait_ready()
    with httpx.Client(base_url=process.url, timeout=60) as session:
        session.post("/invocations", json=make_decision(scoring="letters"))
        session.post("/invocations", content="".join(json.dumps(make_decision(f"m{i}", scoring="pmi")) + "\n"
                                                     for i in range(3)), headers=JSONL)
        session.post("/invocations", json={"decision": {}})
    wait_until(lambda: process.logs().count('"_aws"') >= 5, timeout_s=10, what="the EMF records")
    records = [json.loads(line) for line in process.logs().splitlines() if '"_aws"' in line]
    for record in records:
        jsonschema.validate(record, EMF_SCHEMA)
        directive = record["_aws"]["CloudWatchMetrics"][0]
        assert directive["Namespace"] == NAMESPACE and record["EndpointName"] == "semif-x"
        for metric in directive["Metrics"]:  # every metric and dimension a target member of the record
            assert metric["Name"] in record
        assert all(name in record for dimensions in directive["Dimensions"] for name in dimensions)
        assert "decision_id" not in record and "m0" not in json.dumps(record)  # no high-cardinality values
    decisions = [r for r in records if "Decisions" in r]
    assert sorted(r["Scoring"] for r in decisions) == ["letters", "pmi"]
    pmi = next(r for r in decisions if r["Scoring"] == "pmi")
    assert pmi["Decisions"] == [1, 1, 1] and len(pmi["DecisionLatency"]) == 3 and "AllowedTokenMass" not in pmi
    outcomes = [(r["ClientErrors"], r["ServerErrors"]) for r in records if "ClientErrors" in r]
    assert outcomes == [(0, 0), (0, 0), (1, 0)]
