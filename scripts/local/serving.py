"""Serve one app on loopback until stopped, watching the children it fronts.

Shared by the chat container (fronting llama-server) and the gateway (fronting
both containers): SIGTERM and SIGINT become a normal stop, and a child that
exits stops the server too, so a dead model never hides behind a live port.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Sequence

import uvicorn
from starlette.applications import Starlette

from .processes import LOOPBACK, Child

WATCH_INTERVAL_S = 0.2
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Stopped(BaseException):
    """SIGTERM or SIGINT arrived: a normal stop (a BaseException, so no `except Exception` swallows it)."""


def _raise_stopped(signum: int, frame: object) -> None:
    raise Stopped(signal.Signals(signum).name)


def install_stop_handlers() -> None:
    """From now on SIGTERM/SIGINT raise Stopped (so `finally` blocks stop children)."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, _raise_stopped)


def ignore_stop_signals() -> None:
    """While children are being stopped, a second Ctrl-C must not cut the clean-up short."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)


def _watch(children: Sequence[Child], server: uvicorn.Server, dead: list[Child]) -> None:
    while not server.should_exit:
        for child in children:
            if not child.alive():
                dead.append(child)
                server.should_exit = True
                return
        time.sleep(WATCH_INTERVAL_S)


def serve_app(app: Starlette, port: int, watched: Sequence[Child]) -> Child | None:
    """Serve until a stop signal (returns None) or until a watched child exits (returns it)."""
    server = uvicorn.Server(uvicorn.Config(app, host=LOOPBACK, port=port, log_level="warning",
                                           access_log=False, server_header=False, date_header=False))
    dead: list[Child] = []
    threading.Thread(target=_watch, args=(watched, server, dead), daemon=True).start()
    with contextlib.suppress(Stopped):
        server.run()
    server.should_exit = True
    return dead[0] if dead else None
