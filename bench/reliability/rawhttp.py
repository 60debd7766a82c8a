"""HTTP/1.1 by hand over a socket, for what a well-behaved client library will not do.

Lie about Content-Length, trickle a body byte by byte, leave before the answer:
the abuse a server meets from real networks. Responses are parsed with the
standard library's own parser (`http.client.HTTPResponse`), never by regex.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import select
import socket
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit


@dataclass(frozen=True)
class RawResponse:
    status: int
    headers: dict[str, str]  # lower-case names
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    def error_code(self) -> str | None:
        """`error.code` of a JSON error envelope, else None."""
        with contextlib.suppress(ValueError, TypeError, KeyError):
            return self.json()["error"]["code"]
        return None


def connect(url: str, timeout_s: float = 10.0) -> socket.socket:
    parts = urlsplit(url)
    sock = socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80), timeout=timeout_s)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def request_head(url: str, path: str, content_length: int) -> bytes:
    """Request line and headers of a JSON POST that declares `content_length` bytes (truthfully or not)."""
    lines = [f"POST {path} HTTP/1.1", f"Host: {urlsplit(url).netloc}", "Content-Type: application/json",
             f"Content-Length: {content_length}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def read_response(sock: socket.socket, timeout_s: float) -> RawResponse | None:
    """The next response on `sock`, or None if the server closed or stayed silent for `timeout_s`."""
    sock.settimeout(timeout_s)
    response = http.client.HTTPResponse(sock)
    try:
        response.begin()
        body = response.read()
    except (OSError, http.client.HTTPException):
        return None
    headers = {name.lower(): value for name, value in response.getheaders()}
    return RawResponse(response.status, headers, body)


def send_and_close(url: str, data: bytes, *, linger_s: float = 0.0) -> None:
    """Send `data`, wait `linger_s`, then close without reading: the client that walks away."""
    with connect(url) as sock:
        sock.sendall(data)
        if linger_s:
            time.sleep(linger_s)


def trickle(url: str, path: str, body: bytes, *, chunk: int, interval_s: float, give_up_s: float,
            stop_after: int | None = None) -> tuple[RawResponse | None, float]:
    """Send `body` `chunk` bytes every `interval_s` (only `stop_after` bytes of it, if given).

    Returns the response and the seconds from the first byte to it. The sender keeps the connection
    open until the server answers, closes, or `give_up_s` passes: a slow client, not a vanished one.
    """
    limit = len(body) if stop_after is None else stop_after
    started = time.monotonic()
    with connect(url) as sock:
        sock.sendall(request_head(url, path, len(body)))
        sent = 0
        while time.monotonic() - started < give_up_s:
            readable, _, _ = select.select([sock], [], [], interval_s)
            if readable:  # the server answered (or closed) before the body was complete
                return read_response(sock, 5.0), time.monotonic() - started
            if sent < limit:
                try:
                    sock.sendall(body[sent:min(sent + chunk, limit)])
                except OSError:
                    return read_response(sock, 5.0), time.monotonic() - started
                sent = min(sent + chunk, limit)
            elif sent == len(body):
                return read_response(sock, max(give_up_s - (time.monotonic() - started), 0.1)), \
                    time.monotonic() - started
        return None, time.monotonic() - started
