"""The chat endpoint's chat template at synth: a model without one, and values llama-server would misuse or refuse.

The stock DLC runs llama-server, and SageMaker's `/invocations` reaches only its `/v1/chat/completions`, so every
request is framed by a chat template. Measured with the pinned llama-server's `/apply-template` on Gemma 3 270M
(a GGUF without a template; README "Packaging a model"):

- no template in the GGUF and no `SM_LLAMA_CPP_CHAT_TEMPLATE`: ChatML (common_chat_templates_init's fallback). It
  serves, so the synth warns (`model_warnings`) instead of failing;
- with Jinja on (llama-server's default) the value is the template's Jinja source; only `chatml` is read as a name.
  A bare built-in name such as `gemma` renders as the literal text `gemma`, the whole prompt of every request: the
  endpoint answers nonsense and no health check notices, so the synth fails;
- with `SM_LLAMA_CPP_NO_JINJA=true` the value must be a template llama.cpp's own `llama_chat_apply_template`
  accepts (a built-in name, or a template it recognises), else llama-server exits at start-up ("the supplied chat
  template is not supported") and the endpoint fails its health check after the deployment's wait: the synth
  applies it the same way and fails first.
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping

from semif_adapter.deploy.artifact import CHAT_TEMPLATE_KEY, NO_JINJA_KEY, chat_template_warning

from .environment import EnvironmentSettings
from .problems import Problems

JINJA_MARKERS = ("{{", "{%")
JINJA_NAME = "chatml"  # the one name common_chat_templates_init reads as a name with Jinja on


def check_chat_template(settings: EnvironmentSettings) -> Problems:
    """A configured `SM_LLAMA_CPP_CHAT_TEMPLATE` the chat endpoint would render literally or refuse."""
    if settings.chat is None:
        return []  # no chat endpoint: nothing frames chats
    llama_env = settings.llama_env_for("chat")
    value = llama_env.get(CHAT_TEMPLATE_KEY)
    if not value or value.lower() == "false":
        return []
    where = f"{'chat.llama_env' if CHAT_TEMPLATE_KEY in settings.chat.llama_env else 'llama_env'}.{CHAT_TEMPLATE_KEY}"
    if not jinja_off(llama_env):
        if value != JINJA_NAME and not any(marker in value for marker in JINJA_MARKERS):
            return [(where, f"with Jinja on (llama-server's default) the value is a Jinja template, and {value!r} "
                            "has no {{ }} or {% %}: llama-server would send the literal text "
                            f"{value!r} as the prompt of every chat; for a llama.cpp built-in template name, "
                            f"also set {NO_JINJA_KEY}=true (only 'chatml' works as a name with Jinja on)")]
        return []
    if not legacy_template_accepted(value):
        return [(where, f"{value!r} is not a template llama.cpp knows without Jinja ({NO_JINJA_KEY}=true): "
                        "llama-server would exit at start-up (\"the supplied chat template is not supported\"); "
                        f"use one of its built-in names ({', '.join(builtin_templates())}) or a Jinja template "
                        f"without {NO_JINJA_KEY}")]
    return []


def jinja_off(llama_env: Mapping[str, str]) -> bool:
    return llama_env.get(NO_JINJA_KEY, "").lower() == "true"


def legacy_template_accepted(template: str) -> bool:
    """llama-server's own check without Jinja (common_chat_verify_template): one user message must apply."""
    import llama_cpp  # the pinned library; loaded only when a template is configured

    message = llama_cpp.llama_chat_message(role=b"user", content=b"test")
    chat = (llama_cpp.llama_chat_message * 1)(message)
    return bool(llama_cpp.llama_chat_apply_template(template.encode(), chat, 1, True, None, 0) >= 0)


def builtin_templates() -> list[str]:
    """The template names the pinned llama.cpp knows (`llama_chat_builtin_templates`)."""
    import llama_cpp

    count = llama_cpp.llama_chat_builtin_templates(None, 0)
    names = (ctypes.c_char_p * count)()
    llama_cpp.llama_chat_builtin_templates(names, count)
    return sorted(name.decode() for name in names if name)


def missing_template_warning(has_chat_template: bool | None, llama_env: Mapping[str, str]) -> str | None:
    """The packaging warning, unless the chat endpoint is given a template."""
    if llama_env.get(CHAT_TEMPLATE_KEY, "false").lower() != "false":
        return None
    return chat_template_warning(has_chat_template)
