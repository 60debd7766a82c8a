"""Process entry point: `serve` as SageMaker starts it, or the same thing locally.

Order matters for `/ping` to never lie: the model file is found and checked
before the port opens (a missing, ambiguous or non-GGUF model exits at once
with one log line); the port then opens within milliseconds, answering 503
while llama.cpp loads and a warm-up decision runs; a load failure stops the
server with a non-zero exit. SIGTERM lets admitted decisions finish, refuses
new connections, and exits within the drain time (well inside SageMaker's 30 s).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import logging
import signal
import socket
import sys
import time
from concurrent.futures import Future
from pathlib import Path
from types import FrameType
from typing import Any

import uvicorn

from .core import metrics
from .core.decider import Decider
from .core.native_service import NativeDecisionService
from .core.service import DecisionService
from .doors.api_keys import ApiKeys, KeysFileError
from .doors.http_app import build_app
from .engine.decision_types import UnsupportedDecisionTypeError, decision_type, engine_for
from .engine.gguf_header import GGUFHeaderError, read_gguf_info
from .engine.integrity import ModelIntegrityError
from .engine.llama_runtime import RuntimeStartError
from .engine.model_files import ModelFileError, resolve_model_path
from .settings import ABORT_GRACE_SECONDS, Settings, SettingsError, load_settings

LOG = logging.getLogger("semif_adapter")
M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter
MMAP_THRESHOLD_BYTES = 128 * 1024  # glibc's default, made fixed


class JsonLines(logging.Formatter):
    """One JSON object per line: what CloudWatch Logs Insights parses without help."""

    def format(self, record: logging.LogRecord) -> str:
        document: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(), "logger": record.name, "event": record.getMessage(),
        }
        document.update(getattr(record, "fields", {}))
        if record.exc_info:
            document["traceback"] = self.formatException(record.exc_info)
        return json.dumps(document, default=str)


def configure_logging() -> None:
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(JsonLines())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    logging.getLogger("uvicorn.access").disabled = True  # our own access line carries more
    metrics.configure()


class DrainingServer(uvicorn.Server):
    """uvicorn's graceful shutdown, told to the service first so queued work is handled in time."""

    def __init__(self, config: uvicorn.Config, service: Decider) -> None:
        super().__init__(config)
        self._service = service

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        # uvicorn notices the signal on its next 0.1 s tick; refuse new decisions from this instant on.
        self._service.stop_admitting()
        super().handle_exit(sig, frame)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self._service.drain()
        await super().shutdown(sockets)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="serve", description="SemIf decision adapter (SageMaker container)")
    parser.add_argument("command", nargs="?", default="serve", choices=["serve"],
                        help="SageMaker starts containers as `docker run IMAGE serve`")
    parser.add_argument("--model", help="model file (default: SM_LLAMA_CPP_MODEL, else the one .gguf in the dir)")
    parser.add_argument("--model-dir", help="model directory (default: SM_MODEL_DIR, else /opt/ml/model)")
    parser.add_argument("--port", type=int, help="port (default: SAGEMAKER_BIND_TO_PORT, else 8080)")
    parser.add_argument("--host", help="bind address (default: SEMIF_HOST, else 0.0.0.0)")
    return parser.parse_args(argv)


def return_large_buffers_to_the_os() -> None:
    """Keep glibc's mmap threshold fixed, so buffers over 128 KiB are returned to the OS when freed.

    By default glibc raises the threshold after freeing a large mapped block; later multi-MB buffers (a
    refused 6 MB body, its parse, the tokenizer's scratch) then come from the heap, where one small live
    object above them keeps tens of MB resident: RSS after hostile input would depend on allocation order.
    """
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc: nothing to tune
        return
    mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)


def choose_service(settings: Settings, model_path: Path) -> DecisionService | NativeDecisionService:
    """Who scores this file: llama.cpp's own decision engine for a GGUF that declares a decision type (unless
    SEMIF_DECISION_ENGINE says otherwise), our engine for any other; raises RuntimeStartError naming the key."""
    with model_path.open("rb") as stream:
        info = read_gguf_info(stream)
    declared = info.decision_type
    if engine_for(settings.decision_engine, declared) == "ours":
        LOG.info("decision engine: ours", extra={"fields": {"decision_type": declared, "scoring": settings.scoring,
                                                            "why": settings.decision_engine}})
        return DecisionService(settings, model_path)
    if declared is None:
        raise RuntimeStartError(f"SEMIF_DECISION_ENGINE=native, but {model_path.name} declares no "
                                f"{info.decision_type_key}: it is a generic chat model (set auto or ours)")
    try:
        found = decision_type(declared, info.decision_type_key)
    except UnsupportedDecisionTypeError as error:
        raise RuntimeStartError(str(error)) from error
    assert found is not None
    if not info.has_systemone_template:
        raise RuntimeStartError(f"{model_path.name} declares {info.decision_type_key} = {declared!r} but has no "
                                "tokenizer.chat_template.systemone: llama.cpp cannot prompt it")
    LOG.info("decision engine: native", extra={"fields": {"decision_type": declared, "reads": found.reads,
                                                          "why": settings.decision_engine}})
    if settings.calibration is not None:
        LOG.warning("SEMIF_CALIBRATION is not applied on the native path: the model's own head gives the "
                    "probabilities (its temperatures are in the GGUF)")
    return NativeDecisionService(settings, model_path, found, info)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    return_large_buffers_to_the_os()
    configure_logging()
    try:
        settings: Settings = load_settings(model_path=args.model, model_dir=args.model_dir, port=args.port,
                                           host=args.host)
        model_path = resolve_model_path(settings.model_path, settings.model_dir)
        api_keys = ApiKeys(settings.api_keys_file) if settings.api_keys_file else None
        service = choose_service(settings, model_path)
    except (SettingsError, ModelFileError, KeysFileError, OSError, GGUFHeaderError, RuntimeStartError) as error:
        LOG.error("startup failed: %s", error)
        return 1
    config = uvicorn.Config(build_app(service, api_keys), host=settings.host, port=settings.port, log_config=None,
                            access_log=False,
                            timeout_graceful_shutdown=int(settings.drain_seconds + ABORT_GRACE_SECONDS),
                            timeout_keep_alive=75)  # longer than SageMaker's front-end keep-alive
    server = DrainingServer(config, service)
    failure: list[BaseException] = []

    def loaded(job: Future[None]) -> None:
        error = job.exception()
        if error is not None:
            failure.append(error)
            server.should_exit = True  # /ping stays 503 until the process is gone

    def engine_failed(reason: str) -> None:
        failure.append(RuntimeStartError(reason))
        server.should_exit = True  # a native engine that cannot come back: SageMaker replaces the instance

    if isinstance(service, NativeDecisionService):
        service.on_failed = engine_failed

    LOG.info("starting", extra={"fields": {"model_path": str(model_path), "port": settings.port,
                                           "api_keys": len(api_keys.key_ids()) if api_keys else None}})
    # uvicorn drains on SIGTERM/SIGINT, then re-raises the signal to the handlers it found: make those
    # no-ops, so the process goes on to free the model and exit 0 instead of dying by the signal.
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: None)
    service.load().add_done_callback(loaded)
    try:
        server.run()
    finally:
        service.close()
    if failure:
        load_error = failure[0]
        expected = isinstance(load_error, RuntimeStartError | ModelIntegrityError)
        reason = str(load_error) if expected else f"{type(load_error).__name__}: {load_error}"
        LOG.error("startup failed: %s", reason)
        return 1
    return 0
