"""A test model whose chat template shows tool calls: the embedded SmolLM2 GGUF, weights untouched, with a
`tokenizer.chat_template` in Qwen 2.5's tool layout (shortened: no `tools` list; SmolLM2 already speaks ChatML, whose
`<|im_start|>`/`<|im_end|>` Qwen's template writes). SmolLM2's own template has no tool calls, so the adapter shows a
conversation's calls as JSON lines there; on this copy it renders them as the template does. Plumbing only: the model
was never trained on the layout. Written once per user into the cache.

    python -m scripts.dev.tool_template_model   # prints the path
"""

from __future__ import annotations

import os
from pathlib import Path

import gguf
from gguf.scripts.gguf_new_metadata import MetadataDetails, copy_with_new_metadata

from .model_copies import cached_copy

TOOL_TEMPLATE = (
    "{%- if messages[0]['role'] == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- else %}{{- '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{%- endif %}"
    "{%- for message in messages %}"
    "{%- if (message.role == 'user') or (message.role == 'system' and not loop.first)"
    " or (message.role == 'assistant' and not message.tool_calls) %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}"
    "{%- elif message.role == 'assistant' %}"
    "{{- '<|im_start|>' + message.role }}"
    "{%- if message.content %}{{- '\\n' + message.content }}{%- endif %}"
    "{%- for tool_call in message.tool_calls %}"
    "{%- if tool_call.function is defined %}{%- set tool_call = tool_call.function %}{%- endif %}"
    "{{- '\\n<tool_call>\\n{\"name\": \"' }}{{- tool_call.name }}{{- '\", \"arguments\": ' }}"
    "{{- tool_call.arguments | tojson }}{{- '}\\n</tool_call>' }}"
    "{%- endfor %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- elif message.role == 'tool' %}"
    "{%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != 'tool') %}{{- '<|im_start|>user' }}{%- endif %}"
    "{{- '\\n<tool_response>\\n' }}{{- message.content }}{{- '\\n</tool_response>' }}"
    "{%- if loop.last or (messages[loop.index0 + 1].role != 'tool') %}{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def write_tool_template_model(source: Path, target: Path) -> Path:
    reader = gguf.GGUFReader(str(source))
    arch = reader.fields[gguf.Keys.General.ARCHITECTURE].contents()
    new = {gguf.Keys.Tokenizer.CHAT_TEMPLATE: MetadataDetails(gguf.GGUFValueType.STRING, TOOL_TEMPLATE),
           gguf.Keys.General.NAME: MetadataDetails(gguf.GGUFValueType.STRING, target.stem)}
    partial = target.with_name(target.name + ".partial")
    writer = gguf.GGUFWriter(str(partial), arch=arch, endianess=reader.endianess)
    copy_with_new_metadata(reader, writer, new, [])
    os.replace(partial, target)
    return target


def tool_template_model() -> Path:
    """The cached copy (written on first use)."""
    return cached_copy("chat", "tool-template", TOOL_TEMPLATE, write_tool_template_model)


if __name__ == "__main__":
    print(tool_template_model())
