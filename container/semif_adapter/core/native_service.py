"""The decision service for a decision-typed GGUF: llama.cpp's own decision engine scores, the doors stay ours.

A request's questions go to the native server together, as one System One request (`Question.asked`: the question
as its caller typed it, which the model's own `systemone` template words), never split: a joint head (clef) answers
each question with the others in its prompt. Every request finds the server's slots empty (`NativeServer.ask_fresh`),
so every door answers exactly what a fresh `llama-server` answers to the same file and request, whatever came
before. Around it the adapter keeps what the endpoint promises:
admission and the bounded queue (503 `queue_full`), the drain on SIGTERM, option limits checked before the call
(a clear error naming the limit), and the server's own errors translated into the door's shapes (its 400 is a
client's mistake, anything else a 503 the client may retry; never a 5xx for a bad request).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import re
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from ..engine.decision_types import DecisionType
from ..engine.gguf_header import GGUFInfo
from ..engine.integrity import digest
from ..engine.laya_cut import HeadLength, LayaCut
from ..engine.llama_runtime import ModelFacts, RuntimeStartError
from ..engine.llama_settings import DEFAULT_MAX_CONTEXT, FlashAttention, context_size
from ..engine.native_server import NativeReply, NativeServer, NativeServerOptions, NativeUnavailableError
from ..errors import NotReadyError, PromptTooLongError, RequestError, ServiceError, ShuttingDownError
from .admission import AdmissionQueue
from .conversation import as_sent
from .decided import Decided, Timing, Tokens
from .identity import ModelIdentity
from .methods import PromptId
from .model_load import ModelLoad
from .question import Question, canonical_state
from .scoring import INPUT_TRUNCATED, Scores, softmax
from .service_settings import ServiceSettings

LOG = logging.getLogger("semif_adapter")
CALL_TIMEOUT_SECONDS = 60.0  # SageMaker's own invocation timeout: no request waits on the native server longer
NATIVE_SOURCE = "native"  # `Tokens.source`: llama-server evaluated the prompt
SMALLEST_PROBABILITY = 1e-300  # log(0) has no JSON; a probability this small reads as its log's floor
WARMUP_REQUEST = {"state": "The adapter is starting.", "questions": {
    "ready": {"type": "noul", "instructions": "Is the adapter ready?"}}}


class EngineUnavailableError(ServiceError):
    """The native server is down, restarting or hung: retry here shortly, or elsewhere."""

    status, code, retry_after = 503, "engine_unavailable", 5


class NativeDecisionService:
    """The `DecisionService` interface the doors and the process use, over a `NativeServer`."""

    def __init__(self, settings: ServiceSettings, model_path: Path, decision: DecisionType, info: GGUFInfo) -> None:
        self.settings = settings
        self.model_path = model_path
        self.decision = decision
        self.info = info  # the header the engine was chosen from (server.py), not read again
        self.scoring = f"native:{decision.name}"
        self.workers = settings.workers or 1
        self.loading = ModelLoad("native-load")
        # Calls wait on the server, not on a CPU: enough threads that the server's own slots are never starved.
        self._calls = ThreadPoolExecutor(max_workers=max(4, 4 * self.workers), thread_name_prefix="native-call")
        self._loaded = False
        self.admission = AdmissionQueue(settings.queue_size, settings.drain_seconds, self._unready)
        template = info.systemone_template
        # The prompt is the file's own systemone template, filled by llama-server: that template is what we know.
        self.prompt = PromptId(self.scoring, hashlib.sha256(template.encode()).hexdigest() if template else None)
        self._cut: LayaCut | None = None  # laya: which questions its head reads cut
        self.server: NativeServer | None = None
        self.on_failed: Callable[[str], None] | None = None  # the process exits: SageMaker replaces the instance

    # -- the interface the process and the doors use ------------------------------------------------------------
    @property
    def saves_prefixes(self) -> bool:
        return False  # the native server keeps its own prompt cache; nothing is saved for a next request here

    @property
    def ready(self) -> bool:
        return self._loaded and self.server is not None and self.server.ready

    @property
    def identity(self) -> ModelIdentity:
        return self.loading.identity

    def load(self) -> Future[None]:
        return self.loading.start(self._load)

    def _load(self) -> None:
        started = time.perf_counter()
        model = digest(self.model_path, self.settings.model_sha256)
        info = self.info
        context_train = info.context_length or DEFAULT_MAX_CONTEXT
        context = context_size(self.settings.ctx_size, context_train)
        options = NativeServerOptions(
            model=self.model_path, slots=self.workers, context_per_slot=context, threads=self.settings.threads,
            threads_batch=self.settings.threads_batch, batch_size=self.settings.batch_size,
            ubatch_size=self.settings.ubatch_size, n_gpu_layers=self.settings.n_gpu_layers,
            flash_attn={FlashAttention.ENABLED: "on", FlashAttention.DISABLED: "off"}.get(self.settings.flash_attn),
            binary=self.settings.llama_server)
        self.server = NativeServer(options, on_failed=self._give_up)
        try:
            self.server.start()
        except RuntimeStartError as error:
            raise RuntimeStartError(f"llama.cpp's decision engine cannot serve this '{self.decision.name}' model: "
                                    f"{error}") from error
        reply = self.server.call("POST", "/v1/systemone", WARMUP_REQUEST, CALL_TIMEOUT_SECONDS)
        if reply.status != 200:
            raise RuntimeStartError(f"the native decision engine refused its warm-up question: {reply.document}")
        if self.decision.truncates:
            self._cut = self._laya_cut(self.server)
        facts = ModelFacts(file=self.model_path.name, architecture=info.architecture, quantization=info.quantization,
                           context_train=context_train, context=context, vocab_size=info.vocab_size or 0)
        identity = self.loading.found(ModelIdentity.of(model, facts, self.settings.model_name, decision={
            "type": self.decision.name, "engine": "native", "reads": self.decision.reads,
            "option_limit": self.decision.option_limit, "semantics": self.decision.semantics(), "slots": self.workers}))
        self._loaded = True
        LOG.info("ready", extra={"fields": {
            "engine": "native", "decision_type": self.decision.name, "model": identity.document,
            "model_name": identity.name, "load_ms": round((time.perf_counter() - started) * 1000, 1),
            "native_start_ms": round(self.server.started_ms, 1), "slots": self.workers,
            "context_per_slot": context, "threads": self.settings.threads, "queue_size": self.settings.queue_size}})

    def _laya_cut(self, server: NativeServer) -> LayaCut:
        info = self.info
        if info.systemone_template is None or info.max_head_tokens is None or info.mask_token_id is None \
                or info.separator_token_id is None:
            raise RuntimeStartError("a laya model needs its systemone template, max_head_tokens and mask and "
                                    "separator tokens (llama-server would refuse it)")
        piece = server.call("POST", "/detokenize", {"tokens": [info.mask_token_id]}, CALL_TIMEOUT_SECONDS)

        def tokenize(text: str) -> list[int]:
            reply = server.call("POST", "/tokenize", {"content": text, "add_special": False, "parse_special": True},
                                CALL_TIMEOUT_SECONDS)
            tokens = reply.document.get("tokens") if isinstance(reply.document, dict) else None
            if reply.status != 200 or not isinstance(tokens, list):
                raise NativeUnavailableError(f"llama-server did not tokenize: {reply.status}")
            return [int(token) for token in tokens]

        return LayaCut(info.systemone_template, tokenize, max_head_tokens=info.max_head_tokens,
                       mask=info.mask_token_id, separator=info.separator_token_id,
                       mask_text=str(piece.document["content"]))

    def _give_up(self, reason: str) -> None:
        LOG.error("the native decision engine cannot be restarted: %s", reason)
        if self.on_failed is not None:
            self.on_failed(reason)

    def stop_admitting(self) -> None:
        self.admission.stop_admitting()

    def drain(self) -> None:
        """At the deadline the requests stop waiting (`AdmissionQueue`); llama-server finishes its call unheard."""
        self.admission.drain(lambda: None)

    def close(self) -> None:
        self._loaded = False
        self.loading.close()
        if self.server is not None:
            self.server.stop()
        self._calls.shutdown(wait=False, cancel_futures=True)

    # -- decisions ----------------------------------------------------------------------------------------------
    def _unready(self) -> ServiceError | None:
        if self.ready:
            return None
        return EngineUnavailableError("the native decision engine is not answering; retry") if self._loaded \
            else NotReadyError()

    async def decide_all(self, questions: Sequence[Question]) -> list[Decided | BaseException]:
        """One native request per state (a request's questions share one), answers in input order."""
        admitted_at = time.perf_counter()
        self.admission.admit(len(questions))
        try:
            answers: list[Decided | BaseException | None] = [None] * len(questions)
            for indexes in _by_state(questions):
                group = [questions[i] for i in indexes]
                for index, answer in zip(indexes, await self._ask(group, admitted_at), strict=True):
                    answers[index] = answer
            return [a for a in answers if a is not None]
        finally:
            self.admission.release(len(questions))

    async def _ask(self, group: list[Question], admitted_at: float) -> list[Decided | BaseException]:
        names = _unique_names(group)
        refused = [self._over_limit(question) for question in group]
        if any(refused):
            return [error or _not_scored() for error in refused]
        body = {"state": as_sent(group[0].state), "questions": {
            name: _native_question(question) for name, question in zip(names, group, strict=True)}}
        server = self.server
        assert server is not None
        call = asyncio.wrap_future(self._calls.submit(self._call, server, body))
        try:
            with self.admission.waiting_on([call]):
                reply, lengths = await call
        except asyncio.CancelledError:
            if self.admission.draining:
                return [ShuttingDownError() for _ in group]
            raise
        except NativeUnavailableError as error:
            LOG.warning("native decision call failed: %s", error)
            return [EngineUnavailableError("the native decision engine did not answer; retry") for _ in group]
        if reply.status != 200:
            over = over_the_heads_limit(reply)
            if over is not None:  # the head's own limit, lower than the type's (lev's codes that are single tokens)
                name, count, limit = over
                return [self._too_many(count, limit) if own == name else _not_scored() for own in names]
            refusal = self._over_one_batch(reply) or _refusal(reply)
            return [refusal for _ in group]
        answers = reply.document.get("answers", {}) if isinstance(reply.document, dict) else {}
        usage = reply.document.get("usage", {}) if isinstance(reply.document, dict) else {}
        input_tokens = int(usage.get("input_tokens", 0))
        shares = _shares(input_tokens, len(group))
        cut = _cut_questions(lengths, input_tokens, len(group))
        finished = time.perf_counter()
        timing = Timing(total_ms=(finished - admitted_at) * 1000, forward_ms=reply.elapsed_ms)
        decided: list[Decided | BaseException] = []
        for name, question, tokens, was_cut in zip(names, group, shares, cut, strict=True):
            probabilities = _probabilities(question, answers.get(name))
            if probabilities is None:
                decided.append(EngineUnavailableError("the native decision engine gave no answer to a question; retry"))
                continue
            decided.append(self._decided(question, probabilities, tokens, timing,
                                         warnings=[INPUT_TRUNCATED] if was_cut else []))
        return decided

    def _call(self, server: NativeServer, body: dict[str, Any]) -> tuple[NativeReply, list[HeadLength | None]]:
        """The request on cleared slots, and, for laya, each question's head before and after its cut."""
        reply = server.ask_fresh("/v1/systemone", body, CALL_TIMEOUT_SECONDS)
        if self._cut is None or reply.status != 200:
            return reply, []
        cut = self._cut
        return reply, [cut.length(body["state"], name, question) for name, question in body["questions"].items()]

    def _over_one_batch(self, reply: NativeReply) -> RequestError | None:
        """A joint head (clef) reads its scores from the rows of the prompt's last physical batch: a request longer
        than one batch can leave it rows short, and llama-server answers 500. The slots were cleared first (no cached
        prefix shortened that batch), so the request's length is the cause, the caller's to fix."""
        if not self.decision.joint or reply.status != 500 or _error_of(reply).get("message") != \
                "failed to get embeddings":
            return None
        return RequestError("options_too_long", f"the request is too long for a '{self.decision.name}' decision "
                            "model: its joint head reads every score from the last physical batch of the prompt, and "
                            "a prompt longer than one batch of SM_LLAMA_CPP_UBATCH_SIZE tokens (512 unless set) can "
                            "leave it short of rows", "decision.options")

    def _over_limit(self, question: Question) -> RequestError | None:
        limit = self.decision.option_limit
        if question.asked is None or len(question.answers) <= limit:
            return None
        return self._too_many(len(question.answers), limit)

    def _too_many(self, count: int, limit: int) -> RequestError:
        return RequestError("too_many_options", f"{count} options, more than the {limit} a '{self.decision.name}' "
                            "decision model can tell apart", f"decision.options[{limit}]")

    def _decided(self, question: Question, probabilities: list[float], tokens: int, timing: Timing, *,
                 warnings: list[str]) -> Decided:
        """What llama-server measured: its share of the request's tokens, every one evaluated on erased slots, and
        the call's time; no queue, tokenization, restore or shared opening of its own (absent, not zero)."""
        logits = np.log(np.maximum(np.asarray(probabilities, dtype=np.float64), SMALLEST_PROBABILITY))
        if question.temperature != 1.0:  # the caller's own temperature, on top of the head's
            probabilities = softmax(logits / question.temperature).tolist()
        counted = Tokens(prompt=tokens, evaluated=tokens, cached=0, read=tokens, source=NATIVE_SOURCE)
        return Decided(question=question, scores=Scores(logits.tolist(), probabilities, warnings, None),
                       method=self.scoring, prompt=self.prompt, timing=timing, tokens=counted)


def _by_state(questions: Sequence[Question]) -> list[list[int]]:
    groups: dict[str, list[int]] = {}
    for index, question in enumerate(questions):
        groups.setdefault(canonical_state(question.state), []).append(index)
    return list(groups.values())


def _unique_names(group: Sequence[Question]) -> list[str]:
    names: list[str] = []
    for index, question in enumerate(group):
        name = question.asked.name if question.asked is not None else f"question_{index}"
        names.append(name if name not in names else f"{name}_{index}")
    return names


def _native_question(question: Question) -> dict[str, Any]:
    asked = question.asked
    if asked is None:
        raise RequestError("not_native", "this question cannot be asked of a decision model")
    document: dict[str, Any] = {"type": asked.type, "instructions": asked.instructions}
    if asked.criteria is not None:
        document["criteria"] = asked.criteria
    return document


def _probabilities(question: Question, answer: Any) -> list[float] | None:
    """The head's probabilities in the question's answer order (noul: "true", "false")."""
    if not isinstance(answer, dict):
        return None
    if "noul" in answer:
        yes = float(answer["noul"])
        by_id = {"true": yes, "false": 1.0 - yes}
    else:
        by_id = {str(key): float(value) for key, value in (answer.get("probabilities") or {}).items()}
    try:
        found = [by_id[a.id] for a in question.answers]
    except KeyError:
        return None
    return found if all(math.isfinite(p) for p in found) else None


def _cut_questions(lengths: list[HeadLength | None], input_tokens: int, count: int) -> list[bool]:
    """Which questions the head read cut. Where our count of what it read is not the server's own (a template our
    Jinja renders otherwise), a question is said cut whenever the request as rendered is longer than what was read:
    never cut silently."""
    if not lengths:  # not a laya model
        return [False] * count
    if all(length is not None for length in lengths) and \
            sum(length.read for length in lengths if length is not None) == input_tokens:
        return [length is not None and length.cut for length in lengths]
    LOG.warning("laya's cut could not be counted exactly (%s tokens read, the server counted %d)",
                [length and length.read for length in lengths], input_tokens)
    rendered = sum(length.rendered for length in lengths if length is not None)
    return [rendered > input_tokens or length is None for length in lengths]


def _shares(total: int, count: int) -> list[int]:
    """The request's input tokens over its questions (the server counts them per request)."""
    share, rest = divmod(total, count)
    return [share + (rest if index == 0 else 0) for index in range(count)]


def _not_scored() -> RequestError:
    return RequestError("not_scored", "another question of this request was refused")


TOO_MANY_OPTIONS = re.compile(r"questions\.(?P<name>.+): too many options \((?P<count>\d+)\), this model supports at "
                              r"most (?P<limit>\d+)")


OVER_ONE_BATCH = re.compile(r"the question and its options \(\d+ tokens\) are too large to process")


def _error_of(reply: NativeReply) -> dict[str, Any]:
    """llama-server's `error` object: `{}` where the reply carries none, its text as the message where it is not an
    object."""
    error = reply.document.get("error") if isinstance(reply.document, dict) else None
    if error is None:
        return {}
    return error if isinstance(error, dict) else {"message": str(error)}


def over_the_heads_limit(reply: NativeReply) -> tuple[str, int, int] | None:
    """llama-server's 400 for a question with more options than the loaded head has labels: (name, count, limit)."""
    found = TOO_MANY_OPTIONS.search(str(_error_of(reply).get("message", "")))
    if reply.status != 400 or found is None:
        return None
    return found["name"], int(found["count"]), int(found["limit"])


def _refusal(reply: NativeReply) -> ServiceError:
    """llama-server's error, in our terms: its 400 is the caller's mistake (the door names it in its own shape);
    a model that could not evaluate (500) or any other status is the engine's, 503 and retryable."""
    error = _error_of(reply)
    message = str(error.get("message") or f"status {reply.status}")
    if reply.status == 400 and error.get("type") == "exceed_context_size_error":
        return PromptTooLongError(int(error.get("n_prompt_tokens") or 0), int(error.get("n_ctx") or 0),
                                  "the decision model's prompt for one question", "decision.state")
    if reply.status == 400 and OVER_ONE_BATCH.search(message):
        return RequestError("options_too_long", f"{message}: a head that reads the embeddings output (kev, laya, "
                            "clef) reads a question and its options in one physical batch, "
                            "SM_LLAMA_CPP_UBATCH_SIZE tokens", "decision.options")
    if reply.status == 400:
        return RequestError("invalid_request", f"the decision model refused the request: {message}")
    LOG.warning("native decision server answered %d: %s", reply.status, message)
    return EngineUnavailableError(f"the native decision engine failed ({reply.status}); retry")

