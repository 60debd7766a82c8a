"""Jinja as chat templates are written for: Hugging Face's `apply_chat_template` environment, which llama.cpp's own
template engine follows (a sandbox, `trim_blocks` and `lstrip_blocks`, loop controls, `tojson` without ASCII
escapes, `raise_exception`). One place, so that every template the adapter renders itself reads the same."""

from __future__ import annotations

import json
from typing import Any

from jinja2 import Template, TemplateError
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


def _tojson(value: Any, indent: int | None = None, separators: tuple[str, str] | None = None,
            sort_keys: bool = False) -> str:
    return json.dumps(value, ensure_ascii=False, indent=indent, separators=separators, sort_keys=sort_keys)


def _raise_exception(message: str) -> None:
    raise TemplateError(message)


def _environment() -> ImmutableSandboxedEnvironment:
    environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    environment.filters["tojson"] = _tojson
    environment.globals["raise_exception"] = _raise_exception
    return environment


ENVIRONMENT = _environment()


def compiled(source: str) -> Template | None:
    """The template, or None where it does not compile here (llama.cpp may still read it: its caller says what
    then)."""
    try:
        return ENVIRONMENT.from_string(source)
    except TemplateError:
        return None
