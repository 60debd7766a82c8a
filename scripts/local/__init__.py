"""Both endpoints on this machine behind a SageMaker-runtime-compatible gateway.

    semif local --port 8080 [--model PATH] [--prefix local] [--shared]

Serves `{prefix}-chat` and `{prefix}-decision` on http://127.0.0.1:PORT until
Ctrl-C or SIGTERM, so that boto3 works unmodified with `endpoint_url=`:

    boto3.client("sagemaker-runtime", endpoint_url="http://127.0.0.1:8080", region_name="us-east-1")
         .invoke_endpoint(EndpointName="local-chat", ContentType="application/json", Body=...)

With `--shared` they are the inference components `{prefix}-chat` and `{prefix}-decision` of ONE endpoint
`{prefix}-models`, as `shared` hosting deploys them: invoke with `InferenceComponentName=`. With
`--scale-to-zero SECONDS` too, a component idle that long stops, and a request to it gets SageMaker's no-capacity
error until it is up again (the scale-out from zero).

With `--api-keys FILE` (lines `KEY_ID sha256:HEX`, from `python -m semif_adapter.doors.api_keys create NAME`),
System One's `POST /v1/systemone` and `GET /v1/models` are the API the CDK app deploys on AWS (`https_api`):
Bearer keys, then the decision endpoint through the SageMaker API, the same code as on AWS:

    semif local --port 8080 --api-keys keys.txt

`SM_LLAMA_CPP_*` variables in the environment reach both containers, as the
stack's settings reach both endpoints. Exit status: 0 after a stop signal,
1 when a container fails, 2 for a refused setting, model or port.

No AWS account is needed: a chat container with the llama.cpp DLC's semantics (`chat_container`), the decision
container (`container/serve`, run as is), and a gateway that speaks the SageMaker runtime API (`gateway`), so that
unmodified boto3 and the very smoke tests used against AWS work against loopback; the gateway also serves System
One's own routes for the decision endpoint (`decision_routes`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from semif_decision_client.api_front import DEFAULT_TIMEOUT_S

from ..common.command import Subparsers, add_command
from ..common.discovery import LOCAL_PORT, LOCAL_PREFIX
from .endpoints import STARTUP_TIMEOUT_S


def add_parser(subparsers: Subparsers) -> None:
    parser = add_command(subparsers, "local", __doc__,
                         summary="both endpoints on this machine behind a SageMaker-runtime gateway")
    parser.add_argument("--port", type=int, default=LOCAL_PORT, help="gateway port (default %(default)s)")
    parser.add_argument("--model", type=Path, help="GGUF model file (default: the embedded SmolLM2-135M)")
    parser.add_argument("--prefix", default=LOCAL_PREFIX, help="endpoints are PREFIX-chat, PREFIX-decision")
    parser.add_argument("--shared", action="store_true",
                        help="serve both as inference components of one endpoint PREFIX-models (shared hosting)")
    parser.add_argument("--scale-to-zero", type=float, metavar="SECONDS",
                        help="with --shared: a component idle for SECONDS stops; a request to it gets SageMaker's "
                             "no-capacity error and starts it again (scale to zero)")
    parser.add_argument("--api-keys", type=Path, metavar="FILE",
                        help="serve System One's routes as the AWS System One API does, with the hashed keys of FILE")
    parser.add_argument("--api-timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="SECONDS",
                        help="with --api-keys: the API's integration timeout (https_api.integration_timeout_s, "
                             "default %(default)s)")
    parser.add_argument("--log-dir", type=Path, help="container logs (default: a new temporary directory)")
    parser.add_argument("--startup-timeout", type=float, default=STARTUP_TIMEOUT_S, metavar="SECONDS")


def run(args: argparse.Namespace) -> int:
    from .service import serve

    return serve(args)
