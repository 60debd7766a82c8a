"""The adapter's tokenizer, engine and methods in process on the real model, for tests that must see every cache
state (tests/adapter/test_engine_caches.py, test_workers.py)."""

from __future__ import annotations

import random

import llama_cpp

from semif_adapter.core.methods import Letters, Likelihood, Pmi, PromptRunner
from semif_adapter.core.prompt import ANSWERS_SYSTEM_TEXT, LETTERS_SYSTEM_TEXT
from semif_adapter.core.question import Question
from semif_adapter.core.service import EXACTNESS_PROBES
from semif_adapter.doors.request_schema import DecisionRequest
from semif_adapter.engine.kv_engine import KvEngine
from semif_adapter.engine.llama_runtime import LlamaRuntime
from semif_adapter.engine.prefix_cache import PrefixCache
from semif_adapter.engine.tokens import PromptTokenizer

STATES = ["Order 1182 arrived with a cracked screen.", {"ticket": 7, "text": "Where is my parcel? 9 days late."},
          ["charged twice", "order 7", 3]]
QUESTIONS = ["What should support do next?", "Which team handles this?"]
OPTIONS = [{"id": "refund", "description": "Refund the order"}, {"id": "replace", "description": "Send a new one"},
           {"id": "human", "description": "Ask a human agent"}]


OPENING = "Ticket 1042 from a gold customer, account 88-231, region eu-west, channel email. "
WORDS = ["the", "invoice", "for", "November", "was", "charged", "twice", "to", "card", "ending", "in", "and", "they",
         "want", "one", "charge", "refunded", "before", "weekend", "with", "a", "written", "confirmation"]


def tail(seed: int, count: int) -> str:
    """Words that tokenize to about `count` tokens, different for each seed."""
    return " ".join(random.Random(seed).choice(WORDS) for _ in range(count))


class Engine:
    """The adapter's tokenizer, engine and methods on one context, with a cache of a chosen size."""

    def __init__(self, runtime: LlamaRuntime, cache_bytes: int) -> None:
        self.runtime = runtime
        self.cache = PrefixCache(cache_bytes)
        self.tokenizer = PromptTokenizer(runtime)
        self.engine = KvEngine(runtime, self.cache)
        self.work = PromptRunner(self.tokenizer, self.engine)
        letters_frame = runtime.chat_frame(None, LETTERS_SYSTEM_TEXT)
        self.letters = Letters(letters_frame, runtime.slot_tokens(letters_frame))
        self.likelihood = Likelihood(runtime.chat_frame(None, ANSWERS_SYSTEM_TEXT))
        self.methods = {"letters": self.letters, "likelihood": self.likelihood, "pmi": Pmi(self.likelihood)}

    def probe_tokens(self) -> list[int]:
        """The start-up probes' tokens, as the service builds them (letters prompts about EXACTNESS_PROBES)."""
        probes = [request_of(state, QUESTIONS[0]) for state in EXACTNESS_PROBES]
        return [t for r in probes for t in self.tokenizer.tokens(self.letters.plan(r)).joined()]

    def enable_partial_reuse(self) -> list[str]:
        return self.engine.enable_partial_reuse(self.probe_tokens())

    def score(self, method: str, state: object, question: str, options: list[dict] = OPTIONS) -> tuple:
        raw = self.methods[method].score(request_of(state, question, options, method), self.work)
        return raw.option_logits.tobytes(), raw.effort.cache_source, raw.effort.cached_tokens

    def close(self) -> None:
        self.engine.close()


def request_of(state: object, question: str, options: list[dict] = OPTIONS, method: str = "letters") -> Question:
    """A SemIf decision as the core's question."""
    return DecisionRequest.model_validate({"decision": {"id": "t", "state": state, "question": question,
                                                        "options": options}}).to_question(method)


def score_alone(runtime: LlamaRuntime, method: str, state: object, question: str) -> tuple:
    """`Engine.score` on a new engine, an empty KV cache and no host cache: nothing reused at all (the reference
    every cached path must reproduce). Leaves the KV cache empty."""
    llama_cpp.llama_memory_clear(runtime.memory, False)
    alone = Engine(runtime, 0)
    try:
        return alone.score(method, state, question)
    finally:
        alone.close()
        llama_cpp.llama_memory_clear(runtime.memory, False)
