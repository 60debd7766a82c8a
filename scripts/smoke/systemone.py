"""`semif smoke systemone`: the official System One SDK against an environment's System One API, with nothing but its
`base_url` and a key, as any tool outside AWS would call it.

Against AWS the API's URL is the stack's `SystemOneApiUrl` output, once the stack is settled and the decision endpoint
is InService on the endpoint config the stack expects (as `smoke decision` waits). Then: the models list names
`jev-latest`; one request with a question of each type is answered in each type (probabilities that sum to 1, a
noul in [0, 1], a score within its levels); and a wrong key is refused with 401 `authentication_error` (an API that
answers strangers fails the smoke test). The key comes from `--key-env` (default `TYPESAFE_API_KEY`, the SDK's own
variable), never from the command line, and is never printed.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping
from typing import Any

from ..common.discovery import gateway_url, stack_name, stack_outputs, target_from_outputs, wait_in_service
from .answers import SmokeFailure

URL_OUTPUT = "SystemOneApiUrl"
KEY_ENV = "TYPESAFE_API_KEY"
WRONG_KEY = "sk-semif-smoke-test-not-a-key"
TOLERANCE = 1e-6


def _sdk() -> Any:
    try:
        import typesafe_sdk
    except ImportError:
        raise SmokeFailure("smoke systemone needs the official System One SDK: pip install "
                           "'semif-sagemaker[systemone]' (or typesafe-sdk)") from None
    return typesafe_sdk


def api_url(outputs: Mapping[str, str], stack: str) -> str:
    if URL_OUTPUT not in outputs:
        raise SmokeFailure(f"stack {stack} has no output {URL_OUTPUT}: its environment has no https_api in "
                           "cdk.json (README: Your own System One API on AWS), or it is not deployed yet")
    return outputs[URL_OUTPUT]


def api_key(env_var: str, environ: Mapping[str, str] = os.environ) -> str:
    key = environ.get(env_var, "").strip()
    if not key:
        raise SmokeFailure(f"no API key in ${env_var}: make one with `semif keys create ENV NAME` and export it")
    return key


def questions(sdk: Any, payload: Mapping[str, Any]) -> dict[str, Any]:
    kinds = {"noul": sdk.Noul, "choice": sdk.Choice, "score": sdk.Score}
    try:
        return {qid: kinds[question["type"]](**question) for qid, question in payload["questions"].items()}
    except (KeyError, TypeError, ValueError) as error:
        raise SmokeFailure(f"the payload's questions are not System One questions: {error!r}") from error


def check_answers(result: Any, asked: Mapping[str, Any]) -> str:
    """Each question answered in its own type, with numbers that mean what System One says; a summary."""
    if set(result.answers) != set(asked):
        raise SmokeFailure(f"answers for {sorted(result.answers)}, asked {sorted(asked)}")
    parts = []
    for qid, question in asked.items():
        answer = result.answers[qid]
        if answer.type != question.type:
            raise SmokeFailure(f"question {qid!r} is a {question.type}, answered as a {answer.type}")
        if answer.type == "noul":
            if not 0.0 <= answer.noul <= 1.0:
                raise SmokeFailure(f"{qid}: noul {answer.noul} is not a probability")
            parts.append(f"{qid}={answer.noul:.3f}")
            continue
        total = math.fsum(answer.probabilities.values())
        if abs(total - 1.0) > TOLERANCE:
            raise SmokeFailure(f"{qid}: probabilities sum to {total}")
        if answer.type == "choice":
            parts.append(f"{qid}={answer.choice!r}")
        else:
            parts.append(f"{qid}={answer.score:.2f}")
    return ", ".join(parts)


def _refuses_a_wrong_key(sdk: Any, base_url: str, transport: Any) -> None:
    """A wrong key must get 401 `authentication_error`: an API that answers it checks no keys."""
    try:
        with sdk.TypeSafeClient(api_key=WRONG_KEY, base_url=base_url, retry=sdk.RetryPolicy(max_retries=0),
                                transport=transport) as stranger:
            stranger.models.list()
    except sdk.TypeSafeAuthenticationError as refused:
        detail = refused.body.get("detail", {}) if isinstance(refused.body, dict) else {}
        if refused.status != 401 or detail.get("error_type") != "authentication_error":
            raise SmokeFailure(f"a wrong key got {refused.status} {refused.body!r}, not 401 authentication_error") \
                from refused
        return
    except sdk.TypeSafeError as error:
        raise SmokeFailure(f"{base_url}: a wrong key got {error}, not 401 authentication_error") from error
    raise SmokeFailure(f"{base_url}: a wrong key was answered: the API does not check keys")


def smoke_api(base_url: str, key: str, payload: Mapping[str, Any], *, transport: Any = None) -> str:
    """Call the API as a tool would; the report line, or SmokeFailure."""
    sdk = _sdk()
    asked = questions(sdk, payload)
    started = time.monotonic()
    try:
        with sdk.TypeSafeClient(api_key=key, base_url=base_url, transport=transport) as client:
            names = [model.name for model in client.models.list().models]
            result = client.system_one(state=payload["state"], questions=asked)
    except sdk.TypeSafeAuthenticationError as refused:
        raise SmokeFailure(f"{base_url}: the key was refused ({refused.status}): check ${KEY_ENV} and "
                           "`semif keys list`") from refused
    except sdk.TypeSafeError as error:
        raise SmokeFailure(f"{base_url}: {error}") from error
    elapsed = time.monotonic() - started
    if "jev-latest" not in names:
        raise SmokeFailure(f"GET /v1/models lists {names}, without jev-latest")
    summary = check_answers(result, asked)
    _refuses_a_wrong_key(sdk, base_url, transport)
    return (f"answered in {elapsed:.2f} s ({summary}); models {names}; a wrong key is refused with 401; "
            f"request id {result.request_id}")


def resolve_url(args: Any, session: Any, poller: Any) -> str:
    """The API to test: `--api-url`, the local gateway, or the stack's output once its decision endpoint is up."""
    if args.api_url:
        return str(args.api_url).rstrip("/")
    if args.local:
        return gateway_url(args.port)
    stack = stack_name(args.env, stack=args.stack, app=args.app)
    outputs = stack_outputs(session.client("cloudformation"), stack, poller)
    url = api_url(outputs, stack)
    wait_in_service(session.client("sagemaker"), target_from_outputs(outputs, "decision", stack), poller)
    return url
