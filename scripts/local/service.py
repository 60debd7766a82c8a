"""Both endpoints until a stop signal: the two containers (chat, decision) started and ready, then the gateway in
front of them, and everything stopped in order.

One job per module of this package: `chat_container` (the llama.cpp DLC's semantics: llama-server behind its
front), `endpoints` (starting both containers), `gateway` (the SageMaker runtime API on loopback), `control_plane`,
`sagemaker_errors` and `eventstream` (SageMaker's describe calls, error shapes and stream framing), `decision_routes`
and `api_front` (System One's own routes), `processes`, `proxy` and `serving` (children, relaying, serving).
"""

from __future__ import annotations

import argparse
import errno
import os
import socket
import tempfile
import time
from pathlib import Path

from semif_adapter.deploy.llama_flags import FlagError, check_environment
from semif_adapter.doors.api_keys import ApiKeys, KeysFileError
from semif_adapter.engine.embedded_model import EmbeddedModelMissingError, embedded_model_path

from .endpoints import (
    container_env,
    gateway_routes,
    local_containers,
    restart,
)
from .gateway import create_gateway
from .processes import LOOPBACK, ChildError
from .scale_to_zero import ZeroScaler
from .serving import Stopped, ignore_stop_signals, install_stop_handlers, serve_app


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


def serve(args: argparse.Namespace) -> int:
    """Start both containers, then serve the gateway until a stop signal; the exit status."""
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
    if args.scale_to_zero is not None and not args.shared:
        say("refused: --scale-to-zero needs --shared (SageMaker scales only inference components to zero)")
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
            scaler = None
            if args.scale_to_zero is not None:  # the scaler owns the copies: one stopped is at zero, not dead
                env = container_env(os.environ, model)
                scaler = ZeroScaler(containers, lambda c: restart(c, env, log_dir), idle_s=args.scale_to_zero,
                                    startup_timeout_s=args.startup_timeout)
                say(f"scale to zero: a component idle for {args.scale_to_zero:g} s stops; the next request gets "
                    "SageMaker's no-capacity error and starts it again")
            gateway = create_gateway(routes, api_keys=args.api_keys, api_timeout_s=args.api_timeout, scaler=scaler)
            try:
                dead = serve_app(gateway, args.port, [] if scaler else [c.child for c in containers])
            finally:
                if scaler is not None:
                    scaler.close()
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


