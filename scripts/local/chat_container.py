"""The chat container, locally: the llama.cpp DLC's entry point and nginx front, in Python.

Reproduces the stock DLC contract so local runs behave like the endpoint:
model = `SM_LLAMA_CPP_MODEL`, else the first `*.gguf` then `*/*.gguf` under
`SM_LLAMA_CPP_MODEL_DIR` (default /opt/ml/model); every other `SM_LLAMA_CPP_*`
becomes a llama-server flag through `semif_adapter.deploy.llama_flags` (the one
mapping); llama-server listens on loopback and this front serves
`SM_LLAMA_CPP_PORT` (default 8080): `GET /ping` -> `/health`,
`POST /invocations` -> `/v1/chat/completions`, anything else passed through,
all unbuffered. Unlike the DLC it refuses a bad flag at once (exit 2) instead
of letting SageMaker find out at the end of its health-check timeout, and it
exits when llama-server does.

    python -m scripts.local.chat_container [--port N] [--model PATH]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from semif_adapter.deploy.llama_flags import PREFIX, FlagError, check_environment, server_args
from semif_adapter.engine.model_files import DEFAULT_MODEL_DIR, ModelFileError, scan_model_dir

from .processes import LOOPBACK, free_port, start_child
from .proxy import closing_client, forwardable, open_stream, relay
from .serving import ignore_stop_signals, install_stop_handlers, serve_app

DEFAULT_PORT = 8080
PING_TIMEOUT_S = 2.0  # SageMaker's own ping timeout
# nginx's proxy_read_timeout is 3600 s; locally an hour-long hang helps nobody.
UPSTREAM_TIMEOUT = httpx.Timeout(connect=5.0, read=600.0, write=60.0, pool=5.0)


def _model_dir(env: Mapping[str, str]) -> str:
    """The directory the DLC's entry point searches when no model file is named (as given)."""
    return env.get(f"{PREFIX}MODEL_DIR") or DEFAULT_MODEL_DIR


def dlc_model_path(env: Mapping[str, str]) -> Path | None:
    """The model the DLC's entry point would load, or None when it finds none."""
    explicit = env.get(f"{PREFIX}MODEL")
    if explicit:
        return Path(explicit)
    root = Path(_model_dir(env))
    for pattern in ("*.gguf", "*/*.gguf"):
        found = sorted(root.glob(pattern))
        if found:
            return found[0]
    return None


def layout_warning(env: Mapping[str, str]) -> str | None:
    """Why the model dir would be refused by our packaging rules, if it would (the DLC just picks one)."""
    if env.get(f"{PREFIX}MODEL"):
        return None
    try:
        scan_model_dir(Path(_model_dir(env)))
    except ModelFileError as error:
        return str(error)
    return None


def llama_server_binary() -> str:
    """`LLAMA_SERVER`, else the one beside this interpreter (the venv's), else PATH's."""
    beside = Path(sys.executable).parent / "llama-server"
    return os.environ.get("LLAMA_SERVER") or (str(beside) if beside.exists() else None) \
        or shutil.which("llama-server") or "llama-server"


def llama_server_argv(binary: str, env: Mapping[str, str], port: int) -> list[str]:
    """The command line the DLC's entry point runs, with our loopback port."""
    argv = [binary, "--host", LOOPBACK, "--port", str(port)]
    model = dlc_model_path(env)
    if model is not None:
        argv += ["--model", str(model)]
    return argv + server_args(env)


def _unreachable(upstream: str) -> Response:
    return JSONResponse(
        {"error": {"code": "upstream_unavailable",
                   "message": f"llama-server at {upstream} is not accepting connections "
                              "(starting or exited)"}},
        status_code=502,
    )


def create_front(upstream: str) -> Starlette:
    """The nginx config of the DLC as an app: fixed routes to llama-server, bodies streamed through."""
    client = httpx.AsyncClient(timeout=UPSTREAM_TIMEOUT)

    async def forward(request: Request, path: str) -> Response:
        body = await request.body()
        url = f"{upstream}{path}" + (f"?{request.url.query}" if request.url.query else "")
        try:
            response = await open_stream(client, request.method, url, body,
                                         forwardable(request.headers.items()))
        except httpx.TransportError:
            return _unreachable(upstream)
        return StreamingResponse(relay(response), status_code=response.status_code,
                                 headers=forwardable(response.headers.items()))

    async def ping(request: Request) -> Response:
        try:
            health = await client.get(f"{upstream}/health", timeout=PING_TIMEOUT_S)
        except httpx.TransportError:
            return _unreachable(upstream)
        return Response(health.content, status_code=health.status_code,
                        headers=forwardable(health.headers.items(), drop=frozenset({"content-encoding"})))

    async def invocations(request: Request) -> Response:
        return await forward(request, "/v1/chat/completions")

    async def passthrough(request: Request) -> Response:
        return await forward(request, "/" + request.path_params["path"])

    methods = ["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"]
    return Starlette(
        routes=[
            Route("/ping", ping, methods=["GET"]),
            Route("/invocations", invocations, methods=["POST"]),
            Route("/{path:path}", passthrough, methods=methods),
        ],
        lifespan=closing_client(client),
    )


def serve(env: Mapping[str, str], port: int) -> int:
    """Run llama-server and the front until SIGTERM/SIGINT (0) or llama-server's exit (1)."""
    try:
        check_environment(env)
    except FlagError as error:
        print(f"chat container: refused: {error}", file=sys.stderr)
        return 2
    model = dlc_model_path(env)
    if model is None:
        print(f"chat container: no *.gguf under {_model_dir(env)}; set {PREFIX}MODEL or {PREFIX}MODEL_DIR",
              file=sys.stderr)
        return 2
    if warning := layout_warning(env):
        print(f"chat container: warning: {warning}; the DLC loads {model}", file=sys.stderr)
    upstream_port = free_port()
    argv = llama_server_argv(llama_server_binary(), env, upstream_port)
    print("chat container: " + " ".join(argv), file=sys.stderr, flush=True)
    install_stop_handlers()
    child = start_child("llama-server", argv, env)
    try:
        dead = serve_app(create_front(f"http://{LOOPBACK}:{upstream_port}"), port, [child])
    finally:
        ignore_stop_signals()
        status = child.stop()
    if dead is not None:
        print(f"chat container: llama-server exited with status {status}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, help=f"serve port (default: {PREFIX}PORT or {DEFAULT_PORT})")
    parser.add_argument("--model", type=Path, help=f"model file (sets {PREFIX}MODEL)")
    args = parser.parse_args(argv)
    env = dict(os.environ)
    if args.model is not None:
        env[f"{PREFIX}MODEL"] = str(args.model)
    port = args.port if args.port is not None else int(env.get(f"{PREFIX}PORT") or DEFAULT_PORT)
    return serve(env, port)


if __name__ == "__main__":
    sys.exit(main())
