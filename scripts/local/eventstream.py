"""AWS event-stream encoder for InvokeEndpointWithResponseStream responses.

botocore only decodes this framing (botocore/eventstream.py), so the local
gateway has to write it. A message is: prelude (total length, headers length,
CRC32 of those 8 bytes), headers, payload, and a CRC32 of everything before it.
The sagemaker-runtime model declares `ResponseStream` with a `PayloadPart`
event whose `Bytes` member is the raw event payload, and two exception events
(`ModelStreamError`, `InternalStreamFailure`) with JSON payloads.
"""

from __future__ import annotations

import json
import struct
from binascii import crc32

STRING_HEADER = 7  # header value type: UTF-8 string (botocore EventStreamHeaderParser)
MAX_PAYLOAD_BYTES = 24 * 1024 * 1024  # botocore refuses larger payloads
MAX_HEADER_VALUE_BYTES = 0xFFFF


def _header(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode(), value.encode()
    if len(raw_name) > 0xFF or len(raw_value) > MAX_HEADER_VALUE_BYTES:
        raise ValueError(f"event-stream header {name!r} is too long")
    return (struct.pack("!B", len(raw_name)) + raw_name + struct.pack("!BH", STRING_HEADER, len(raw_value))
            + raw_value)


def encode_message(headers: dict[str, str], payload: bytes) -> bytes:
    """One framed event-stream message."""
    if len(payload) > MAX_PAYLOAD_BYTES:
        raise ValueError(f"event-stream payload of {len(payload)} bytes exceeds {MAX_PAYLOAD_BYTES}")
    header_bytes = b"".join(_header(name, value) for name, value in headers.items())
    total = 12 + len(header_bytes) + len(payload) + 4
    prelude = struct.pack("!II", total, len(header_bytes))
    prelude += struct.pack("!I", crc32(prelude) & 0xFFFFFFFF)
    message = prelude + header_bytes + payload
    return message + struct.pack("!I", crc32(message) & 0xFFFFFFFF)


def payload_part(data: bytes) -> bytes:
    """A `PayloadPart` event carrying one chunk of the container's response as is."""
    return encode_message(
        {":event-type": "PayloadPart", ":message-type": "event", ":content-type": "application/octet-stream"},
        data,
    )


def stream_exception(exception_type: str, message: str, error_code: str | None = None) -> bytes:
    """A modeled exception event (`ModelStreamError`, `InternalStreamFailure`) ending the stream."""
    body: dict[str, str] = {"Message": message}
    if error_code is not None:
        body["ErrorCode"] = error_code
    return encode_message(
        {":exception-type": exception_type, ":message-type": "exception",
         ":content-type": "application/json"},
        json.dumps(body).encode(),
    )
