"""The event-stream encoder, decoded by botocore itself (the parser boto3 uses for sagemaker-runtime)."""

from __future__ import annotations

from collections.abc import Iterator

import botocore.session
import pytest
from botocore.eventstream import ChecksumMismatch, EventStream, EventStreamBuffer
from botocore.exceptions import EventStreamError
from botocore.parsers import EventStreamJSONParser

from scripts.local.eventstream import MAX_PAYLOAD_BYTES, encode_message, payload_part, stream_exception

OPERATION = "InvokeEndpointWithResponseStream"


class _Raw:
    """The `raw_stream` botocore's EventStream reads: chunks as the network might deliver them."""

    def __init__(self, chunks: list[bytes]) -> None:
        self._chunks = chunks

    def stream(self) -> Iterator[bytes]:
        yield from self._chunks

    def close(self) -> None:
        pass


def _events(data: bytes, chunk: int) -> EventStream:
    model = botocore.session.get_session().get_service_model("sagemaker-runtime")
    shape = model.operation_model(OPERATION).output_shape.members["Body"]
    chunks = [data[i:i + chunk] for i in range(0, len(data), chunk)]
    return EventStream(_Raw(chunks), shape, EventStreamJSONParser(), OPERATION)


@pytest.mark.parametrize("chunk", [1, 7, 4096])
def test_payload_parts_decode_as_botocore_payload_part_events(chunk: int) -> None:
    parts = [b"data: {\"a\": 1}\n\n", "é—ü".encode(), b"", b"x" * 5000]
    data = b"".join(payload_part(p) for p in parts)
    decoded = [event["PayloadPart"]["Bytes"] for event in _events(data, chunk)]
    assert decoded == parts


def test_headers_are_the_ones_botocore_dispatches_on() -> None:
    buffer = EventStreamBuffer()
    buffer.add_data(payload_part(b"hi"))
    (message,) = list(buffer)
    assert message.headers == {":event-type": "PayloadPart", ":message-type": "event",
                               ":content-type": "application/octet-stream"}
    assert message.payload == b"hi"


def test_model_stream_error_raises_the_modeled_error_in_botocore() -> None:
    data = payload_part(b"partial") + stream_exception("ModelStreamError", "connection reset", "StreamBroken")
    events = iter(_events(data, 64))
    assert next(events) == {"PayloadPart": {"Bytes": b"partial"}}
    with pytest.raises(EventStreamError) as raised:
        next(events)
    assert raised.value.response["Error"] == {"Code": "ModelStreamError", "Message": "connection reset"}


def test_both_checksums_are_checked_by_botocore() -> None:
    message = bytearray(payload_part(b"payload"))
    for index in (5, len(message) - 6):  # inside the prelude, inside the payload
        corrupted = bytearray(message)
        corrupted[index] ^= 0x01
        buffer = EventStreamBuffer()
        buffer.add_data(bytes(corrupted))
        with pytest.raises(ChecksumMismatch):
            list(buffer)


def test_payload_over_botocore_limit_is_refused() -> None:
    with pytest.raises(ValueError, match="exceeds"):
        encode_message({":event-type": "PayloadPart"}, b"\0" * (MAX_PAYLOAD_BYTES + 1))
