"""What a smoke test accepts as an answer: a chat completion with text, a stream that ends properly."""

from __future__ import annotations

import json
from collections.abc import Iterable


class SmokeFailure(Exception):  # noqa: N818 (a verdict, not a programming error)
    """The endpoint is not fit: the message is the one-line reason shown to the operator."""


def chat_content(body: bytes) -> str:
    """`choices[0].message.content` of a chat completion; SmokeFailure if absent or empty."""
    try:
        content = json.loads(body)["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError) as error:
        raise SmokeFailure(f"the answer is not a chat completion ({error!r}): {body[:200]!r}") from error
    if not isinstance(content, str) or not content.strip():
        raise SmokeFailure(f"choices[0].message.content is empty: {body[:200]!r}")
    return content


class SseText:
    """Reassembles the text of a streamed chat completion from byte parts cut anywhere.

    The DLC streams llama-server's server-sent events (`data: {...}` lines);
    SageMaker cuts them into PayloadParts wherever it likes, so lines are rebuilt
    across parts before parsing.
    """

    def __init__(self) -> None:
        self._buffer = b""
        self.pieces: list[str] = []
        self.done = False  # saw `data: [DONE]`
        self.finish_reason: str | None = None

    def feed(self, part: bytes) -> None:
        self._buffer += part
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            self._line(line.strip())

    def _line(self, line: bytes) -> None:
        if not line.startswith(b"data:"):
            return  # blank separators, comments, other SSE fields
        data = line[len(b"data:"):].strip()
        if data == b"[DONE]":
            self.done = True
            return
        try:
            choice = json.loads(data)["choices"][0]
        except (ValueError, KeyError, IndexError) as error:
            raise SmokeFailure(f"a stream event is not a chat completion chunk: {data[:200]!r}") from error
        self.pieces.append(choice.get("delta", {}).get("content") or "")
        self.finish_reason = choice.get("finish_reason") or self.finish_reason

    @property
    def text(self) -> str:
        return "".join(self.pieces)


def stream_text(parts: Iterable[bytes]) -> SseText:
    sse = SseText()
    for part in parts:
        sse.feed(part)
    sse.feed(b"\n")  # flush a last line without its newline
    return sse
