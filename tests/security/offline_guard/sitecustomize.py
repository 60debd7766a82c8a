"""Loaded by the Python that runs checkov (PYTHONPATH): every DNS lookup or connection attempt is refused and
written to $OFFLINE_GUARD_LOG, so a test can prove that checkov never tried to phone home (instead of
trusting a timeout on a machine without internet)."""

from __future__ import annotations

import os
import socket
from typing import Any, NoReturn

LOG = os.environ.get("OFFLINE_GUARD_LOG", "")
_CONNECT = socket.socket.connect


def _refuse(what: str) -> NoReturn:
    if LOG:
        with open(LOG, "a", encoding="utf-8") as log:
            log.write(what + "\n")
    raise OSError(f"offline guard: refused {what}")


def _getaddrinfo(host: Any, *_args: Any, **_kwargs: Any) -> NoReturn:
    _refuse(f"dns {host!r}")


def _connect(sock: socket.socket, address: Any, *args: Any) -> Any:
    if sock.family == socket.AF_UNIX:  # local IPC is not the network
        return _CONNECT(sock, address, *args)
    _refuse(f"connect {address!r}")


socket.getaddrinfo = _getaddrinfo
socket.socket.connect = _connect  # type: ignore[method-assign]
socket.socket.connect_ex = _connect  # type: ignore[method-assign, assignment]
