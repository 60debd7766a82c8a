"""The openai SDK as a user calls it, run by one SDK version's python (.venv: the oldest supported, .venv-openai: the
current) against the local gateway, with a Bearer key and through SageMakerTransport (SigV4); prints what it saw.

Argument: the gateway's URL. Each way is called sync and async, with a string input and with a conversation of every
input item kind, and once with an invalid conversation. The test (test_openai_sdk_range.py) judges the report.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import boto3
import httpx2
import openai
from openai import AsyncOpenAI, OpenAI

from semif_decision_client import AsyncSageMakerTransport, SageMakerTransport

REGION = "eu-west-1"
ENDPOINT = "local-decision"
PLACEHOLDER = "https://sagemaker.invalid/v1"  # never reached: the transport sends every call to SageMaker's runtime
TICKET = "Hi, I was charged twice for my March invoice (order #4471) and the refund has not arrived."
CONVERSATION: list[dict[str, Any]] = [
    {"role": "system", "content": "You are the support desk's triage agent."},
    {"role": "developer", "content": [{"type": "input_text", "text": "Look orders up before you answer."}]},
    {"role": "user", "content": [{"type": "input_text", "text": TICKET}, {"type": "input_json", "data": {"n": 4471}}]},
    {"role": "assistant", "content": [{"type": "output_text", "text": "Let me check."}], "phase": "commentary"},
    {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": '{"order": 4471}'},
    {"type": "function_call_output", "call_id": "c1", "output": "charged twice"},
    {"type": "custom_tool_call", "call_id": "c2", "name": "shell", "input": "grep 4471 refunds.log"},
    {"type": "custom_tool_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "queued"}]},
    {"role": "assistant", "content": [{"type": "refusal", "refusal": "I cannot promise a date."}]},
]
QUESTIONS: list[dict[str, Any]] = [
    {"type": "predicate", "name": "refund", "instructions": "Is the customer asking for money back?"},
    {"type": "choice", "name": "team", "instructions": "Which team should handle this?",
     "choices": [{"value": "billing", "description": "payments"}, {"value": True}, {"value": "true"}]},
    {"type": "score", "name": "anger", "instructions": "How angry?", "levels": [{"label": "calm"}, {"label": "angry"}]},
]
INVALID = [{"type": "function_call_output", "call_id": "nope", "output": "x"}]


def clients(gateway: str) -> dict[str, tuple[OpenAI, AsyncOpenAI]]:
    session = boto3.Session(aws_access_key_id="local", aws_secret_access_key="local", region_name=REGION)
    sigv4 = SageMakerTransport(ENDPOINT, region=REGION, session=session, endpoint_url=gateway)
    async_sigv4 = AsyncSageMakerTransport(ENDPOINT, region=REGION, session=session, endpoint_url=gateway)
    return {"bearer": (OpenAI(base_url=f"{gateway}/v1", api_key="local", max_retries=0),
                       AsyncOpenAI(base_url=f"{gateway}/v1", api_key="local", max_retries=0)),
            "sigv4": (OpenAI(base_url=PLACEHOLDER, api_key="iam", max_retries=0,
                             http_client=httpx2.Client(transport=sigv4)),
                      AsyncOpenAI(base_url=PLACEHOLDER, api_key="iam", max_retries=0,
                                  http_client=httpx2.AsyncClient(transport=async_sigv4)))}


def answers(decision: Any) -> list[dict[str, Any]]:
    return [answer.model_dump(exclude={"x_timing"}) for answer in decision.answers]


def invalid_param(client: OpenAI) -> Any:
    try:
        client.decisions.create(model="jev-latest", input=INVALID, questions=QUESTIONS)  # type: ignore[arg-type]
    except openai.BadRequestError as error:
        return error.body["param"] if isinstance(error.body, dict) else None
    return "no error"


async def async_answers(client: AsyncOpenAI) -> dict[str, Any]:
    async with client:
        text = await client.decisions.create(model="jev-latest", input=TICKET, questions=QUESTIONS)  # type: ignore[arg-type]
        conversation = await client.decisions.create(model="jev-latest", input=CONVERSATION,  # type: ignore[arg-type]
                                                     questions=QUESTIONS, prompt_cache_key="sdk-range")  # type: ignore[arg-type]
    return {"text": answers(text), "conversation": answers(conversation)}


def langchain_answers(gateway: str) -> dict[str, Any] | None:
    """langchain-openai's `OpenAIDecisions`, where this venv has it (the current SDK's), sync and async."""
    try:
        from langchain_openai.decisions import Choice, OpenAIDecisions, Predicate
    except ImportError:
        return None
    decisions = OpenAIDecisions(model="jev-latest", base_url=f"{gateway}/v1", api_key="local", max_retries=0)
    request: Any = {"input": TICKET, "questions": {
        "refund": Predicate(instructions=QUESTIONS[0]["instructions"]),
        "team": Choice(instructions=QUESTIONS[1]["instructions"], choices={"billing": "payments", "other": None})}}
    seen = {"sync": decisions.invoke(request), "async": asyncio.run(decisions.ainvoke(request))}
    return {mode: {"refund": answer.predicates["refund"].probability,
                   "team": answer.choices["team"].choice} for mode, answer in seen.items()}


def main(gateway: str) -> dict[str, Any]:
    report: dict[str, Any] = {"version": openai.__version__, "langchain": langchain_answers(gateway)}
    for way, (sync, asynchronous) in clients(gateway).items():
        with sync:
            text = sync.decisions.create(model="jev-latest", input=TICKET, questions=QUESTIONS)  # type: ignore[arg-type]
            conversation = sync.decisions.create(model="jev-latest", input=CONVERSATION,  # type: ignore[arg-type]
                                                 questions=QUESTIONS, prompt_cache_key="sdk-range",  # type: ignore[arg-type]
                                                 safety_identifier="sdk-range-user")
            report[way] = {"sync": {"text": answers(text), "conversation": answers(conversation),
                                    "usage": conversation.usage.model_dump()},
                           "async": asyncio.run(async_answers(asynchronous)), "invalid_param": invalid_param(sync)}
    return report


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
