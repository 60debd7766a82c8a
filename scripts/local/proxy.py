"""Streaming HTTP forwarding shared by the chat front and the gateway.

Bodies are relayed chunk by chunk as they arrive (nginx's `proxy_buffering
off`), so a streamed chat completion reaches the client token by token.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import httpx

# Hop-by-hop headers (RFC 9110 7.6.1) and framing that the next hop recomputes.
HOP_BY_HOP = frozenset({
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
    "transfer-encoding", "upgrade", "content-length", "host",
})


def forwardable(headers: Iterable[tuple[str, str]], drop: frozenset[str] = frozenset()) -> dict[str, str]:
    """Headers worth passing on: end-to-end ones, minus `drop` (lower-case names)."""
    return {k: v for k, v in headers if k.lower() not in HOP_BY_HOP and k.lower() not in drop}


async def open_stream(client: httpx.AsyncClient, method: str, url: str, body: bytes,
                      headers: Mapping[str, str]) -> httpx.Response:
    """Send a request and return the response with its body still unread (close it when done)."""
    request = client.build_request(method, url, content=body, headers=dict(headers))
    return await client.send(request, stream=True)


async def relay(response: httpx.Response) -> AsyncIterator[bytes]:
    """The upstream body as it arrives; the upstream response is closed at the end, whatever happens."""
    try:
        async for chunk in response.aiter_raw():
            if chunk:
                yield chunk
    finally:
        await response.aclose()


def closing_client(client: httpx.AsyncClient) -> Callable[[Any], AbstractAsyncContextManager[None]]:
    """A Starlette lifespan that closes the app's upstream client at shutdown."""

    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await client.aclose()

    return lifespan
