"""What the engine is handed to tokenize and decode: a prompt cut into fixed pieces (head, state, common part, one
branch per scored continuation), and the chat frame around the user message. The core builds plans (`core.prompt`);
the engine only reads them, so it never needs to know what a question is.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

SLOT_LETTERS = "ABCDEFGHIJKLMNOP"  # one single-token slot label per option, at most 16
PLAIN_FRAME = "plain"  # SEMIF_CHAT_TEMPLATE's name for the frame of a model without a chat template
USER_SENTINEL = "\u0001SEMIF-USER-MESSAGE\u0001"  # stands in for the user message while the frame is cut


@dataclass(frozen=True)
class ChatFrame:
    """The text around the user message, split at the message, for one system text: the model's chat template (or
    a named built-in one), or for a base model with no template the plain frame below."""

    prefix: str  # system turn and the user turn's opening
    suffix: str  # the user turn's closing and the assistant turn's opening
    name: str = "chat"  # "chat" (a chat template) or PLAIN_FRAME
    answer_lead: str = ""  # what precedes an answer's text (the plain frame's space after "Answer:")

    @classmethod
    def from_rendered(cls, rendered: str) -> ChatFrame:
        if rendered.count(USER_SENTINEL) != 1:
            raise ValueError("the chat template does not reproduce the user message exactly once")
        prefix, suffix = rendered.split(USER_SENTINEL)
        return cls(prefix=prefix, suffix=suffix)

    @classmethod
    def plain(cls, system_text: str) -> ChatFrame:
        """A base model's frame, as lm-evaluation-harness scores base models: no template, the instruction, the
        message, then `Answer:` and each answer's text after a space (the space belongs to the answer, as a base
        model's tokenizer joins it to the next word)."""
        return cls(prefix=system_text + "\n\n", suffix="\nAnswer:", name=PLAIN_FRAME, answer_lead=" ")

    def version(self, base: str) -> str:
        """The prompt version answers carry: the frame is part of what the model read."""
        return base if self.name == "chat" else f"{base}-{self.name}"

    @property
    def head(self) -> str:
        """The constant piece before the state; evaluated once per process and kept."""
        return self.prefix + '{"evidence":'

    @property
    def tail(self) -> str:
        """Closes the letters prompt; the slot letter comes right after it (the start-up checks use it)."""
        return "]}" + self.suffix


@dataclass(frozen=True)
class Text:
    """A piece of prompt text; only template text has its special tokens parsed, never a caller's text."""

    text: str
    template: bool = False


@dataclass(frozen=True)
class Branch:
    """One scored continuation of the prompt."""

    order: tuple[int, ...]  # letters: order[slot] = option index; answers: (the option this branch scores,)
    texts: tuple[Text, ...]


@dataclass(frozen=True)
class PromptPlan:
    head: str  # template text
    state: str  # the state piece, user text (the same words for every method)
    common: tuple[Text, ...]
    branches: tuple[Branch, ...]
    version: str
    sha256: str  # of the prompt text, then each scored answer after a NUL (letters: of its first branch)
    partition: str = ""  # the caches' partition (a tenant's prompt_cache_key): never part of the text

    @property
    def prefix_texts(self) -> tuple[str, str]:
        """The cached pieces, in order: what the host-memory cache is keyed on."""
        return (self.head, self.state_key)

    @property
    def state_key(self) -> str:
        """The state piece's cache key: its text, behind its partition's name when it has one (the head, template
        text only, is shared by every partition)."""
        return f"{json.dumps(self.partition)}\x00{self.state}" if self.partition else self.state

    def text(self, branch: int = 0) -> str:
        """The whole prompt up to and including one branch, as a model would read it in one piece."""
        pieces = (self.head, self.state, *(t.text for t in self.common), *(t.text for t in self.branches[branch].texts))
        return "".join(pieces)


def partition_of(state_key: str) -> str:
    """The partition a state's cache key names ("" for none): a state piece is JSON, so it never holds a raw NUL."""
    return json.loads(state_key.split("\x00", 1)[0]) if "\x00" in state_key else ""
