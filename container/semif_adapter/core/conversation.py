"""A conversation as the state the questions are about: chat messages in the shape llama.cpp reads as a message state
(OpenAI Chat Completions': `role`, `content`, an assistant's `tool_calls`, a tool's `tool_call_id`).

Every door that takes a conversation builds one here, so the same conversation asked through System One's message
`state` and OpenAI's `input` items is the same state, bit for bit. User messages alone are read as before, as their
text (one message as it is, several joined by blank lines); any other role or a tool call makes a `Conversation`,
which a decision-typed GGUF reads itself (llama-server's message state) and the adapter's engine renders with the
model's chat template (`turns` says what each message becomes there).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from .question import canonical_state

ROLES = ("system", "developer", "user", "assistant", "tool")
TEMPLATE_ROLE = {"developer": "system"}  # chat templates know system turns; a developer message is one


class Conversation(tuple[dict[str, Any], ...]):
    """The messages, as JSON (a tuple serialises as an array): the state of a question about a conversation. `sent`
    is the state as the caller wrote it (the list, or llama.cpp's wrapped `{"messages": [...]}`), which a decision
    model's own server reads as it was sent."""

    sent: Any

    def __new__(cls, messages: Iterable[dict[str, Any]], sent: Any = None) -> Conversation:
        conversation = super().__new__(cls, messages)
        conversation.sent = list(conversation) if sent is None else sent
        return conversation


def as_sent(state: Any) -> Any:
    """A state as the caller sent it, for llama-server's decision engine."""
    return state.sent if isinstance(state, Conversation) else state


Loc = tuple[int | str, ...]


class ConversationError(ValueError):
    """A message the conversation cannot hold: `loc` names it from the messages' list (`(2, "tool_call_id")`)."""

    def __init__(self, loc: Loc, message: str) -> None:
        super().__init__(f"{loc}: {message}")
        self.loc, self.message = loc, message


def check_calls(items: Iterable[tuple[str | None, str | None]]) -> tuple[int, str] | None:
    """(index, problem) of the first item whose call id repeats an earlier call's, or whose output names no earlier
    call; each item is (the id it calls under, the id it answers), either None."""
    calls: set[str] = set()
    for index, (call, output) in enumerate(items):
        if call is not None:
            if call in calls:
                return index, f"call_id {call!r} is used by an earlier call; each call needs its own id"
            calls.add(call)
        if output is not None and output not in calls:
            return index, f"no earlier call has call_id {output!r}: an output follows the call it answers"
    return None


def state_of(messages: Sequence[dict[str, Any]], sent: Any = None) -> Any:
    """User messages alone: their text, as before; anything else: the conversation."""
    if all(message.get("role") == "user" for message in messages):
        return joined([content_text(message.get("content"), (i, "content")) for i, message in enumerate(messages)])
    return Conversation(messages, sent)


def message_state(state: Any) -> Any:
    """A System One `state` of chat messages, a list or wrapped as llama.cpp's decision engine takes it
    (`{"messages": [...]}`, nothing else beside it: an object with other keys stays a JSON state), read as a
    conversation (ConversationError when a message is not one this endpoint can read); any other state as it is."""
    wrapped = isinstance(state, dict) and set(state) == {"messages"}
    messages = state["messages"] if wrapped else state
    if not (isinstance(messages, list) and messages
            and all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages)):
        return state
    try:
        _check_messages(messages)
        return state_of(messages, state)
    except ConversationError as error:
        raise ConversationError(("messages", *error.loc) if wrapped else error.loc, error.message) from None


def _check_messages(messages: list[dict[str, Any]]) -> None:
    calls: list[tuple[str | None, str | None]] = []
    for index, message in enumerate(messages):
        if message["role"] not in ROLES:
            raise ConversationError((index, "role"), f"role must be one of {list(ROLES)}, not {message['role']!r}")
        content_text(message.get("content"), (index, "content"))
        ids = [_call_id(call, (index, "tool_calls", n)) for n, call in enumerate(message.get("tool_calls") or [])]
        calls += [(call, None) for call in ids]
        if message["role"] == "tool":
            calls.append((None, str(message.get("tool_call_id"))))
        if message["role"] != "assistant" and not ids and "content" not in message:
            raise ConversationError((index, "content"), "a message needs its content")
    problem = check_calls(calls)
    if problem is not None:
        raise ConversationError(_message_of(messages, problem[0]), problem[1])


def _message_of(state: Sequence[dict[str, Any]], call_index: int) -> Loc:
    """The path of the message holding the `call_index`-th call or output `message_state` listed."""
    seen = -1
    for index, message in enumerate(state):
        for number, _ in enumerate(message.get("tool_calls") or []):
            seen += 1
            if seen == call_index:
                return index, "tool_calls", number, "id"
        if message["role"] == "tool":
            seen += 1
            if seen == call_index:
                return index, "tool_call_id"
    return ()


def _call_id(call: Any, loc: Loc) -> str:
    if not isinstance(call, dict) or not isinstance(call.get("id"), str):
        raise ConversationError((*loc, "id"), "a tool call needs a string id")
    if not isinstance(call.get(call.get("type", "function")), dict):
        raise ConversationError(loc, "a tool call is {id, type: function|custom, function|custom: {...}}")
    return str(call["id"])


def content_text(content: Any, loc: Loc) -> Any:
    """A message's content as the model reads it: a string as it is, text parts joined by blank lines."""
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        raise ConversationError(loc, "content must be a string or a list of text parts")
    pieces = []
    for index, part in enumerate(content):
        if not (isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)):
            raise ConversationError((*loc, index), "only text parts ({\"type\": \"text\", \"text\": ...}) are "
                                    "read: this endpoint's model reads text only")
        pieces.append(part["text"])
    return joined(pieces)


def joined(pieces: list[Any]) -> Any:
    """One piece as it is (a JSON piece keeps its structure); several as text joined by blank lines."""
    return pieces[0] if len(pieces) == 1 else "\n\n".join(p if isinstance(p, str) else canonical_state(p)
                                                          for p in pieces)


def turns(conversation: Conversation) -> list[tuple[str, str]]:
    """(role, text) per message, for a chat template: a developer turn as a system one, an assistant's tool calls
    as one canonical JSON line each after its text (templates without tool calls read them so), a tool's output
    as a `tool` turn."""
    out = []
    for index, message in enumerate(conversation):
        text = content_text(message.get("content"), (index, "content"))
        text = text if isinstance(text, str) else canonical_state(text)
        calls = [canonical_state(call) for call in message.get("tool_calls") or []]
        role = message["role"]
        out.append((TEMPLATE_ROLE.get(role, role), "\n".join(piece for piece in (text, *calls) if piece)))
    return out


def plain_transcript(pieces: Sequence[tuple[str, str]]) -> str:
    """The fallback for a model without a chat template (or one llama.cpp cannot apply): `role: text` turns."""
    return "\n\n".join(f"{role}: {text}" for role, text in pieces)


def template_messages(conversation: Conversation) -> list[dict[str, Any]] | None:
    """The conversation as a tool-aware chat template reads it (Chat Completions' messages, each call's JSON
    `arguments` as an object, as llama.cpp hands them to templates, and each tool output named after its call); None
    where it holds no function call, or a custom one, which no chat template knows."""
    calls = [call for message in conversation for call in message.get("tool_calls") or []]
    if not calls or any(call.get("type", "function") != "function" for call in calls):
        return None
    names = {call["id"]: call["function"].get("name") for call in calls}
    out = []
    for index, message in enumerate(conversation):
        text = content_text(message.get("content"), (index, "content"))
        role = message["role"]
        shown: dict[str, Any] = {"role": TEMPLATE_ROLE.get(role, role),
                                 "content": text if isinstance(text, str) else canonical_state(text)}
        if message.get("tool_calls"):
            shown["tool_calls"] = [{**call, "function": {**call["function"], "arguments": _arguments(
                call["function"].get("arguments"))}} for call in message["tool_calls"]]
        if role == "tool":
            shown |= {"tool_call_id": message["tool_call_id"], "name": names.get(message["tool_call_id"])}
        out.append(shown)
    return out


def _arguments(arguments: Any) -> Any:
    """A call's arguments as an object where its JSON string holds one (templates write them with `tojson`)."""
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except ValueError:
            return arguments
        return parsed if isinstance(parsed, dict) else arguments
    return arguments


class Renderer(Protocol):
    """What lays a conversation out as text: the model's own template (engine.llama_runtime)."""

    def render_tool_calls(self, template_name: str | None, messages: list[dict[str, Any]]) -> str | None: ...

    def render_turns(self, template_name: str | None, turns: Sequence[tuple[str, str]]) -> str | None: ...


def conversation_text(conversation: Conversation, renderer: Renderer, template_name: str | None) -> str:
    """The text a generic model reads for a conversation: its tool calls as the model's template shows them where it
    does; else its turns through llama.cpp's template call (each call a JSON line in its turn); else `role: text`."""
    messages = template_messages(conversation)
    text = renderer.render_tool_calls(template_name, messages) if messages else None
    if text is not None:
        return text
    pieces = turns(conversation)
    text = renderer.render_turns(template_name, pieces)
    return text if text is not None else plain_transcript(pieces)
