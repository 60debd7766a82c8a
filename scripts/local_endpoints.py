"""Both endpoints on this machine behind a SageMaker-runtime-compatible gateway.

    python scripts/local_endpoints.py --port 8080 [--model PATH] [--prefix local] [--shared]

Serves `{prefix}-chat` and `{prefix}-decision` on http://127.0.0.1:PORT until
Ctrl-C or SIGTERM, so that boto3 works unmodified with `endpoint_url=`:

    boto3.client("sagemaker-runtime", endpoint_url="http://127.0.0.1:8080", region_name="us-east-1")
         .invoke_endpoint(EndpointName="local-chat", ContentType="application/json", Body=...)

With `--shared` they are the inference components `{prefix}-chat` and `{prefix}-decision` of ONE endpoint
`{prefix}-models`, as `shared` hosting deploys them: invoke with `InferenceComponentName=`.

With `--api-keys FILE` (lines `KEY_ID sha256:HEX`, from `python -m semif_adapter.api_keys create NAME`), System One's
`POST /v1/systemone` and `GET /v1/models` are the API the CDK app deploys on AWS (`systemone_api`): Bearer keys, then
the decision endpoint through the SageMaker API, the same code as on AWS:

    python scripts/local_endpoints.py --port 8080 --api-keys keys.txt

`SM_LLAMA_CPP_*` variables in the environment reach both containers, as the
stack's settings reach both endpoints. Exit status: 0 after a stop signal,
1 when a container fails, 2 for a refused setting, model or port.
"""

from __future__ import annotations

import argparse
import errno
import os
import socket
import sys
import tempfile
import time
from pathlib import Path

if not __package__:  # `python scripts/local_endpoints.py`: run as the module of its package (relative imports)
    import runpy
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    sys.exit(runpy.run_module("scripts.local_endpoints", run_name="__main__", alter_sys=True) and 0)

from semif_adapter.api_keys import ApiKeys, KeysFileError
from semif_adapter.embedded_model import EmbeddedModelMissingError, embedded_model_path
from semif_adapter.llama_flags import FlagError, check_environment

from .local.endpoints import (
    DEFAULT_PREFIX,
    STARTUP_TIMEOUT_S,
    container_env,
    gateway_routes,
    local_containers,
)
from .local.gateway import create_gateway
from .local.processes import LOOPBACK, ChildError
from .local.serving import Stopped, ignore_stop_signals, install_stop_handlers, serve_app
from .local.systemone_front import DEFAULT_TIMEOUT_S
from .usage import command_parser

DEFAULT_PORT = 8080


def say(message: str) -> None:
    print(f"local endpoints: {message}", flush=True)


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((LOOPBACK, port))
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                return False
            raise
    return True


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = command_parser(__doc__, "local_endpoints")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="gateway port (default %(default)s)")
    parser.add_argument("--model", type=Path, help="GGUF model file (default: the embedded SmolLM2-135M)")
    parser.add_argument("--prefix", default=DEFAULT_PREFIX, help="endpoints are PREFIX-chat, PREFIX-decision")
    parser.add_argument("--shared", action="store_true",
                        help="serve both as inference components of one endpoint PREFIX-models (shared hosting)")
    parser.add_argument("--api-keys", type=Path, metavar="FILE",
                        help="serve System One's routes as the AWS System One API does, with the hashed keys of FILE")
    parser.add_argument("--api-timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="SECONDS",
                        help="with --api-keys: the API's integration timeout (systemone_api.integration_timeout_s, "
                             "default %(default)s)")
    parser.add_argument("--log-dir", type=Path, help="container logs (default: a new temporary directory)")
    parser.add_argument("--startup-timeout", type=float, default=STARTUP_TIMEOUT_S, metavar="SECONDS")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        model = (args.model or embedded_model_path()).resolve()
        if not model.is_file():
            raise FileNotFoundError(f"{model}: model file does not exist")
        check_environment(container_env(os.environ, model))
        if args.api_keys is not None:
            ApiKeys(str(args.api_keys))  # a keys file the front cannot read is refused now, not at the first call
    except (EmbeddedModelMissingError, FileNotFoundError, FlagError, KeysFileError) as error:
        say(f"refused: {error}")
        return 2
    if not port_free(args.port):
        say(f"refused: port {args.port} on {LOOPBACK} is in use (pass another --port)")
        return 2
    log_dir = args.log_dir or Path(tempfile.mkdtemp(prefix="local-endpoints-"))
    say(f"starting {args.prefix}-chat and {args.prefix}-decision on {model.name}; logs in {log_dir}")
    started = time.monotonic()
    install_stop_handlers()
    try:
        with local_containers(model, args.prefix, log_dir,
                              startup_timeout_s=args.startup_timeout) as containers:
            routes = gateway_routes(containers, args.prefix, shared=args.shared)
            served = [f"{name} (components {', '.join(target)})" if isinstance(target, dict) else name
                      for name, target in routes.items()]
            api = f"; System One API with the keys of {args.api_keys}" if args.api_keys else ""
            say(f"ready in {time.monotonic() - started:.1f} s: http://{LOOPBACK}:{args.port} serves "
                + ", ".join(served) + api)
            gateway = create_gateway(routes, api_keys=args.api_keys, api_timeout_s=args.api_timeout)
            dead = serve_app(gateway, args.port, [c.child for c in containers])
            ignore_stop_signals()
            if dead is not None:
                say(f"failed: {dead.failure(f'exited with status {dead.process.poll()}')}")
                return 1
    except Stopped:
        say("stopped before the endpoints were ready")
        return 0
    except (ChildError, FileNotFoundError) as error:
        say(f"failed: {error}")
        return 1
    say("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
