"""A conversation with tool calls as the model's own chat template lays it out, where that template shows them.

llama.cpp's template call (`llama_chat_apply_template`) takes a role and a text per message, no tool calls. A
template written for tools (Qwen 2.5's, Llama 3.1's, ...) renders an assistant's `tool_calls` and a tool's output in
the layout the model was trained on: the adapter renders those itself, with Jinja as llama-server renders a chat. A
template shows tool calls when a probe call's name and its output reach the rendered text (llama.cpp's own template
capability probe, `supports_tool_calls`, asks the same); the caller falls back to llama.cpp's call otherwise.
"""

from __future__ import annotations

from typing import Any

from jinja2 import TemplateError

from .jinja_templates import compiled

PROBE_NAME = "semif_probe_tool"
PROBE_OUTPUT = "semif_probe_output"
PROBE: list[dict[str, Any]] = [
    {"role": "user", "content": "Look it up."},
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_probe", "type": "function", "function": {"name": PROBE_NAME, "arguments": {"key": 1}}}]},
    {"role": "tool", "tool_call_id": "call_probe", "name": PROBE_NAME, "content": PROBE_OUTPUT},
]
# What a template's own code may raise on messages it was not written for (a missing key, a string joined to a list).
RENDER_ERRORS = (TemplateError, TypeError, ValueError, LookupError, AttributeError)


class ToolCallTemplate:
    """One model's chat template: `render(messages)` where it shows tool calls, else None."""

    def __init__(self, source: str, eos_token: str) -> None:
        self._template = compiled(source)
        self._eos_token = eos_token
        probe = self._render(PROBE)
        self.shows_tool_calls = probe is not None and PROBE_NAME in probe and PROBE_OUTPUT in probe

    def render(self, messages: list[dict[str, Any]]) -> str | None:
        """The messages as the template lays them out, no assistant turn opened after them (the engine's prompt
        holds BOS already: `bos_token` renders empty)."""
        return self._render(messages) if self.shows_tool_calls else None

    def _render(self, messages: list[dict[str, Any]]) -> str | None:
        if self._template is None:
            return None
        try:
            return self._template.render(messages=messages, add_generation_prompt=False, tools=None,
                                         bos_token="", eos_token=self._eos_token)
        except RENDER_ERRORS:
            return None
