"""A request's body, bounded as it arrives and as it is decompressed.

The System One SDK compresses bodies of 1 KiB or more with `Content-Encoding: zstd` whenever zstd is installed;
gzip is the other encoding clients send. Both are decoded here with the decompressed size capped at the same limit
as a plain body, so a decompression bomb is a 413 and costs at most that much memory; any other encoding is a 415.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import AsyncIterator, Callable

from backports import zstd
from starlette.requests import Request

from ..errors import RequestError

GZIP_WINDOW = 31  # zlib's wbits for a gzip header and trailer
ENCODINGS = ("gzip", "zstd")
DRAIN_BYTES = 64 * 1024 * 1024  # the most of a refused body read (and dropped) so that its 413 reaches the client
DRAIN_IDLE_SECONDS = 1.0  # and the longest pause in its bytes that the drain waits out


def too_large(limit: int, what: str = "body") -> RequestError:
    return RequestError("body_too_large", f"{what} exceeds the {limit}-byte limit", "body", status=413)


async def read_body(request: Request, limit: int) -> bytes:
    """The body as sent, refused once it passes `limit` bytes (or declares more).

    A refused body is still read, and dropped, up to `DRAIN_BYTES`: a client that sends its whole body before it
    reads (urllib, urllib3 and so botocore) would otherwise get a connection reset instead of the 413."""
    chunks = request.stream().__aiter__()
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        await _discard(chunks, 0)
        raise RequestError("body_too_large", f"body of {declared} bytes exceeds the {limit}-byte limit",
                           "body", status=413)
    kept: list[bytes] = []
    size = 0
    async for chunk in chunks:
        size += len(chunk)
        if size > limit:
            await _discard(chunks, size)
            raise too_large(limit)
        kept.append(chunk)
    return b"".join(kept)


async def _discard(chunks: AsyncIterator[bytes], size: int) -> None:
    """Read what is left of a refused body without keeping it, while the total stays within `DRAIN_BYTES` and bytes
    keep coming (a pause of `DRAIN_IDLE_SECONDS` ends it: a client that declared a body and sends nothing gets its
    413 at once). Past either bound the connection is closed under the client: what a refusal may cost is bounded."""
    while size <= DRAIN_BYTES:
        try:
            size += len(await asyncio.wait_for(anext(chunks), DRAIN_IDLE_SECONDS))
        except (StopAsyncIteration, TimeoutError):
            return


def _bounded(decompress: Callable[[bytes, int], bytes], data: bytes, limit: int, finished: Callable[[], bool],
             encoding: str) -> bytes:
    """One pass of a streaming decompressor asked for at most `limit` + 1 bytes: more means too large."""
    out = decompress(data, limit + 1)
    if len(out) > limit:
        raise too_large(limit, f"the {encoding}-decoded body")
    if not finished():
        raise RequestError("invalid_encoding", f"the body is not complete {encoding} data", "Content-Encoding")
    return out


def decode_body(body: bytes, content_encoding: str | None, limit: int) -> bytes:
    """The body with its `Content-Encoding` undone (identity, gzip or zstd), at most `limit` bytes decoded."""
    encoding = (content_encoding or "identity").strip().lower()
    if encoding in ("", "identity"):
        return body
    try:
        if encoding == "gzip":
            inflater = zlib.decompressobj(GZIP_WINDOW)
            return _bounded(inflater.decompress, body, limit, lambda: inflater.eof, encoding)
        if encoding == "zstd":
            decompressor = zstd.ZstdDecompressor()
            return _bounded(decompressor.decompress, body, limit, lambda: decompressor.eof, encoding)
    except (zlib.error, zstd.ZstdError) as error:
        raise RequestError("invalid_encoding", f"the body is not valid {encoding} data: {error}",
                           "Content-Encoding") from None
    raise RequestError("unsupported_encoding", f"Content-Encoding {encoding!r} is not supported; send "
                       f"{', '.join(ENCODINGS)} or none", "Content-Encoding", status=415)
