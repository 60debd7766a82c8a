"""OpenAI Decisions `input` items (openai SDK 3.63.0's `DecisionCreateParams.input`) -> the state the questions are
about.

A list of items is an ordered conversation: user, developer, system and assistant messages (an assistant's
`output_text` and `refusal` parts), `function_call` / `function_call_output` and `custom_tool_call` /
`custom_tool_call_output` items, each output naming an earlier call by `call_id`. User messages alone are read as
before (their text); anything else becomes the chat messages of `core.conversation` (Chat Completions' shape, as
llama.cpp reads a message state): a call joins the assistant message before it as one of its `tool_calls`, an
output is a `tool` message. Items are checked here, before pydantic, so a bad one is named by the field it gets
wrong (`input[3].role`, `input[4].call_id`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, StrictStr, Tag

from ..core.conversation import Conversation, check_calls, joined
from ..core.typed_questions import as_text

_OPEN = ConfigDict(extra="ignore", frozen=True)
MESSAGE_ROLES = ("user", "developer", "system", "assistant")
CALLS = {"function_call": "function", "custom_tool_call": "custom"}
OUTPUTS = ("function_call_output", "custom_tool_call_output")


class TextPart(BaseModel):
    model_config = _OPEN  # prompt_cache_breakpoint is read and ignored (docs/openai-decisions.md)
    type: Literal["input_text"]
    text: StrictStr


class JsonPart(BaseModel):
    model_config = _OPEN
    type: Literal["input_json"]
    data: dict[str, Any] | list[dict[str, Any]]


class ImagePart(BaseModel):
    """Parsed so that it can be refused with a reason: this endpoint's models read text only."""

    model_config = _OPEN
    type: Literal["input_image"]


class OutputText(BaseModel):
    model_config = _OPEN
    type: Literal["output_text"]
    text: StrictStr


class Refusal(BaseModel):
    model_config = _OPEN
    type: Literal["refusal"]
    refusal: StrictStr


Part = Annotated[TextPart | JsonPart | ImagePart, Field(discriminator="type")]
Content = StrictStr | Annotated[list[Part], Field(min_length=1)]
TextContent = StrictStr | Annotated[list[TextPart], Field(min_length=1)]
AssistantPart = Annotated[OutputText | Refusal, Field(discriminator="type")]
OutputPart = Annotated[TextPart | ImagePart, Field(discriminator="type")]


class Message(BaseModel):
    model_config = _OPEN
    role: Literal["user"]
    content: Content
    type: Literal["message"] = "message"


class InstructionMessage(BaseModel):
    """A system or developer message: text only."""

    model_config = _OPEN
    role: Literal["system", "developer"]
    content: TextContent
    type: Literal["message"] = "message"


class AssistantMessage(BaseModel):
    model_config = _OPEN
    role: Literal["assistant"]
    content: StrictStr | Annotated[list[AssistantPart], Field(min_length=1)]
    phase: Literal["commentary", "final_answer"] | None = None
    type: Literal["message"] = "message"


class FunctionCall(BaseModel):
    model_config = _OPEN
    type: Literal["function_call"]
    call_id: StrictStr
    name: StrictStr
    arguments: StrictStr


class CustomToolCall(BaseModel):
    model_config = _OPEN
    type: Literal["custom_tool_call"]
    call_id: StrictStr
    name: StrictStr
    input: StrictStr


class ToolOutput(BaseModel):
    model_config = _OPEN
    type: Literal["function_call_output", "custom_tool_call_output"]
    call_id: StrictStr
    output: StrictStr | list[OutputPart]


def _tag(item: Any) -> str | None:
    if not isinstance(item, dict):
        return None
    kind = item.get("type", "message")
    if kind == "message":
        return {"user": "user", "assistant": "assistant"}.get(str(item.get("role")), "instruction")
    return "output" if kind in OUTPUTS else kind


Item = Annotated[Annotated[Message, Tag("user")] | Annotated[InstructionMessage, Tag("instruction")]
                 | Annotated[AssistantMessage, Tag("assistant")] | Annotated[FunctionCall, Tag("function_call")]
                 | Annotated[CustomToolCall, Tag("custom_tool_call")] | Annotated[ToolOutput, Tag("output")],
                 Discriminator(_tag, custom_error_type="invalid_value",
                               custom_error_message="an input item is a message or a tool call or output object")]
ITEM_MODELS = (TextPart, JsonPart, ImagePart, OutputText, Refusal, Message, InstructionMessage, AssistantMessage,
               FunctionCall, CustomToolCall, ToolOutput)


def item_problem(document: Any) -> tuple[str, str] | None:
    """(param, message) for the first input item of a type or role the API does not have, or whose output names no
    earlier call or whose call repeats an earlier call's id; None when there is none (pydantic checks the rest)."""
    items = document.get("input") if isinstance(document, dict) else None
    if not isinstance(items, list):
        return None
    ids: list[tuple[str | None, str | None]] = []
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            return None  # pydantic names it
        kind = item.get("type", "message")
        if kind == "message" and item.get("role") not in MESSAGE_ROLES:
            return f"input[{index}].role", f"role must be one of {list(MESSAGE_ROLES)}, not {item.get('role')!r}"
        if kind != "message" and kind not in (*CALLS, *OUTPUTS):
            return f"input[{index}].type", (f"type must be one of {['message', *CALLS, *OUTPUTS]}, not {kind!r}")
        call_id = item.get("call_id") if isinstance(item.get("call_id"), str) else None
        ids.append((call_id if kind in CALLS else None, call_id if kind in OUTPUTS else None))
    problem = check_calls(ids)
    return None if problem is None else (f"input[{problem[0]}].call_id", problem[1])


def image_param(items: list[Any]) -> str | None:
    """The param of the first image part of the input items (this endpoint's models read text only)."""
    for index, item in enumerate(items):
        parts = item.content if isinstance(item, Message) else item.output if isinstance(item, ToolOutput) else None
        field = "content" if isinstance(item, Message) else "output"
        for number, part in enumerate(parts if isinstance(parts, list) else []):
            if isinstance(part, ImagePart):
                return f"input[{index}].{field}[{number}]"
    return None


def read(content: Any) -> Any:
    """What the model reads of a content: a string, one JSON part as its structure, several parts joined by blank
    lines."""
    if isinstance(content, str):
        return content
    return joined([part.data if isinstance(part, JsonPart) else part.refusal if isinstance(part, Refusal)
                   else part.text for part in content if not isinstance(part, ImagePart)])


def state(items: str | list[Any]) -> Any:
    """The input as the core's state: a string as it is, user messages as their text, anything else as the
    conversation's chat messages."""
    if isinstance(items, str):
        return items
    if all(isinstance(item, Message) for item in items):
        return joined([read(item.content) for item in items])
    messages: list[dict[str, Any]] = []
    for item in items:
        if isinstance(item, FunctionCall | CustomToolCall):
            kind = CALLS[item.type]
            body = {"name": item.name, "arguments": item.arguments} if isinstance(item, FunctionCall) \
                else {"name": item.name, "input": item.input}
            call = {"id": item.call_id, "type": kind, kind: body}
            if not (messages and messages[-1]["role"] == "assistant"):
                messages.append({"role": "assistant", "content": ""})
            messages[-1] = {**messages[-1], "tool_calls": [*messages[-1].get("tool_calls", []), call]}
        elif isinstance(item, ToolOutput):
            messages.append({"role": "tool", "tool_call_id": item.call_id, "content": as_text(read(item.output))})
        else:
            messages.append({"role": item.role, "content": as_text(read(item.content))})
    return Conversation(messages)
