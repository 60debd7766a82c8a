"""What each decision type does that a caller must know, kept: clef's joint answers, laya's cut, the per-type batch
limit of the heads that read the embeddings output, and the types the pinned llama.cpp does not know.

Test models: scripts/dev/decision_models.py on the tiny random-weight model (plumbing, not quality). References: a
fresh llama-server b11434 started with the adapter's own arguments, asked the same request as its first
(`fresh_answer`).
"""

from __future__ import annotations

import re
import tarfile
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.adapter_process import START_TIMEOUT, AdapterProcess
from support.systemone import many_options

from bench.native.run import fresh_answer, native_arguments
from scripts.dev.build_llama_cpp import fetch_source
from scripts.dev.decision_models import decision_model, write_decision_model
from semif_adapter.core.native_service import OVER_ONE_BATCH, over_the_heads_limit
from semif_adapter.engine.decision_types import DECISION_TYPES, NEWER_TYPES, PINNED_LLAMA_CPP
from semif_adapter.engine.embedded_model import embedded_model_path
from semif_adapter.engine.native_server import NativeReply

STATE = "I was charged twice for my order last week and nobody has replied."
ROUTE = {"type": "choice", "instructions": "Which team should handle this?",
         "criteria": {"shipping": None, "billing": "payments and refunds", "technical": None}}
URGENCY = {"type": "score", "instructions": "How urgent is this?",
           "criteria": ["can wait", "this week", "today", "right now"]}
LONG = " ".join(["The customer describes at length what happened with the order and the refund."] * 12)


def ask(client: httpx.Client, questions: dict[str, Any]) -> dict[str, Any]:
    answered = client.post("/v1/systemone", json={"state": STATE, "questions": questions})
    assert answered.status_code == 200, answered.text
    return answered.json()["answers"]


def started(name: str, **env: str) -> AdapterProcess:
    adapter = AdapterProcess({"SM_LLAMA_CPP_MODEL": str(decision_model(name, tiny=True)), **env})
    adapter.wait_ready()
    return adapter


@pytest.mark.slow
def test_clef_answers_a_requests_questions_jointly_and_the_doors_never_split_them() -> None:
    """clef reads every question of a request in one prompt: the urgency asked after the route is not the urgency
    asked alone, through our doors as through llama-server; our answer to the pair is the joint one (a split
    request would answer each alone), in the request's order with the options in the caller's order."""
    adapter = started("clef")
    try:
        arguments = native_arguments(adapter.logs())["arguments"]
        with httpx.Client(base_url=adapter.url, timeout=120) as client:
            pair = ask(client, {"route": ROUTE, "urgency": URGENCY})
            alone = ask(client, {"urgency": URGENCY})
            openai = client.post("/v1/decisions", json={"model": "jev-latest", "input": STATE, "questions": [
                {"type": "choice", "name": "route", "instructions": ROUTE["instructions"],
                 "choices": [{"value": "shipping"}, {"value": "billing", "description": "payments and refunds"},
                             {"value": "technical"}]},
                {"type": "score", "name": "urgency", "instructions": URGENCY["instructions"],
                 "levels": [{"label": level} for level in URGENCY["criteria"]]}]})
        theirs_pair = fresh_answer(arguments, {"state": STATE, "questions": {"route": ROUTE, "urgency": URGENCY}})
        theirs_alone = fresh_answer(arguments, {"state": STATE, "questions": {"urgency": URGENCY}})
    finally:
        adapter.stop()
    assert pair["urgency"]["probabilities"] != alone["urgency"]["probabilities"]
    assert pair["urgency"]["probabilities"] == theirs_pair.json()["answers"]["urgency"]["probabilities"]
    assert alone["urgency"]["probabilities"] == theirs_alone.json()["answers"]["urgency"]["probabilities"]
    assert list(pair["route"]["probabilities"]) == ["shipping", "billing", "technical"]  # the caller's order
    assert list(theirs_pair.json()["answers"]["route"]["probabilities"]) == ["billing", "shipping", "technical"]
    assert openai.status_code == 200, openai.text
    route, urgency = openai.json()["answers"]
    assert [choice["value"] for choice in route["probabilities"]] == ["shipping", "billing", "technical"]
    assert [level["probability"] for level in urgency["probabilities"]] == \
        list(pair["urgency"]["probabilities"].values())


@pytest.mark.slow
def test_laya_says_in_each_doors_warnings_when_its_head_read_a_cut_request() -> None:
    """laya cuts a long question to its max_head_tokens, as it was trained; the answer carries `input_truncated`
    (SemIf's `warnings`, System One's and OpenAI's `x_warnings`), a short question's does not, and the numbers are
    still a fresh llama-server's."""
    adapter = started("laya")
    try:
        arguments = native_arguments(adapter.logs())["arguments"]
        long_question = {"type": "choice", "instructions": LONG, "criteria": ROUTE["criteria"]}
        with httpx.Client(base_url=adapter.url, timeout=120) as client:
            answers = ask(client, {"long": long_question, "short": ROUTE})
            semif = client.post("/invocations", json={"decision": {
                "id": "x", "state": STATE, "question": LONG,
                "options": [{"id": "a", "description": "refund"}, {"id": "b", "description": "replace"}]}})
            short_semif = client.post("/invocations", json={"decision": {
                "id": "y", "state": STATE, "question": "Which?",
                "options": [{"id": "a", "description": "refund"}, {"id": "b", "description": "replace"}]}})
            openai = client.post("/v1/decisions", json={"model": "jev-latest", "input": STATE, "questions": [
                {"type": "predicate", "instructions": LONG}, {"type": "predicate", "instructions": "Angry?"}]})
        theirs = fresh_answer(arguments, {"state": STATE, "questions": {"long": long_question, "short": ROUTE}})
        logs = adapter.logs()
    finally:
        adapter.stop()
    assert "could not be counted exactly" not in logs  # our count of what the head read is llama-server's own
    assert answers["long"]["x_warnings"] == ["input_truncated"]
    assert answers["short"]["x_warnings"] == []
    assert answers["long"]["probabilities"] == theirs.json()["answers"]["long"]["probabilities"]
    assert semif.json()["warnings"] == ["input_truncated"], semif.text
    assert short_semif.json()["warnings"] == []
    assert [answer["x_warnings"] for answer in openai.json()["answers"]] == [["input_truncated"], []], openai.text


@pytest.mark.slow
@pytest.mark.parametrize(("name", "options"), [("kev", {f"Q{i}": None for i in range(255)}),
                                               ("clef", many_options(255))])
def test_a_question_over_one_batch_of_an_embeddings_head_is_a_4xx_naming_the_setting(name: str,
                                                                                     options: dict[str, Any]) -> None:
    """kev reads a question and its options in one physical batch, clef its scores from the prompt's last one
    (llama.cpp's embedding mode, 512 tokens unless SM_LLAMA_CPP_UBATCH_SIZE says more): a request too long for it is
    the caller's 4xx naming the setting (clef's own llama-server answers it with a 500), and the endpoint serves on."""
    adapter = started(name)
    try:
        with httpx.Client(base_url=adapter.url, timeout=120) as client:
            over = client.post("/v1/systemone", json={"state": STATE, "questions": {"queue": {
                "type": "choice", "instructions": "Which queue?", "criteria": options}}})
            assert over.status_code == 422, over.text
            detail = over.json()["detail"][0]
            assert detail["type"] == "options_too_long" and "SM_LLAMA_CPP_UBATCH_SIZE" in detail["msg"]
            assert "(current batch size: 512)" in detail["msg"] or "512 unless set" in detail["msg"]
            assert ask(client, {"route": ROUTE})["route"]["type"] == "choice"
    finally:
        adapter.stop()


@pytest.mark.without_model  # refused before llama-server starts
@pytest.mark.parametrize("declared", sorted(NEWER_TYPES))
def test_a_type_of_a_newer_llama_cpp_is_refused_at_start_naming_the_build(declared: str, tmp_path: Path) -> None:
    model = write_decision_model(embedded_model_path(), tmp_path / f"{declared}.gguf", declared)
    adapter = AdapterProcess({"SM_LLAMA_CPP_MODEL": str(model)})
    try:
        assert adapter.wait_exit(START_TIMEOUT) == 1
        logs = adapter.logs()
    finally:
        adapter.stop()
    assert f"llama.decision.type = '{declared}' is not a decision type llama.cpp {PINNED_LLAMA_CPP} serves" in logs
    assert "it is served by llama.cpp's stable releases (v1.0.0, 2026-11-13, and later" in logs
    assert "native decision server" not in logs


def test_the_type_table_is_the_pinned_llama_cpps_own_list() -> None:
    """`common_decision_type` in the sdist's common/common.h, NONE and UNKNOWN aside: moving the pin shows here what
    the new build added or dropped."""
    with tarfile.open(fetch_source()) as sdist:
        member = next(m for m in sdist.getmembers() if m.name.endswith("llama.cpp/common/common.h"))
        header = sdist.extractfile(member)
        assert header is not None
        text = header.read().decode()
    enum = re.search(r"enum common_decision_type \{(.*?)\};", text, re.S)
    assert enum is not None
    names = re.findall(r"COMMON_DECISION_TYPE_(\w+)", enum.group(1))
    known = [name.lower().replace("_", "-") for name in names if name not in {"NONE", "UNKNOWN"}]
    assert known == list(DECISION_TYPES)
    assert not set(NEWER_TYPES) & set(known)


def test_llama_servers_own_limit_messages_are_read_as_the_pinned_source_writes_them() -> None:
    """The head's option limit (lev's single-token codes) and the embedding heads' batch are llama-server's to
    enforce; the adapter reads its messages, whose format strings are taken here from the pinned sdist."""
    with tarfile.open(fetch_source()) as sdist:
        sources = {name: sdist.extractfile(next(m for m in sdist.getmembers() if m.name.endswith(name)))
                   for name in ("tools/server/server-decision.cpp", "tools/server/server-context.cpp")}
        texts = {name: stream.read().decode() for name, stream in sources.items() if stream is not None}
    options = re.search(r'err\(string_format\("(too many options [^"]+)"', texts["tools/server/server-decision.cpp"])
    batch = re.search(r'"(the question and its options \(%d tokens\) are too large to process\. )"',
                      texts["tools/server/server-context.cpp"])
    assert options is not None and batch is not None
    message = "questions.queue: " + options.group(1).replace("%zu", "300", 1).replace("%zu", "37", 1)
    reply = NativeReply(400, {"error": {"code": 400, "message": message, "type": "invalid_request_error"}}, 1.0)
    assert over_the_heads_limit(reply) == ("queue", 300, 37)
    assert OVER_ONE_BATCH.search(batch.group(1).replace("%d", "1423"))
