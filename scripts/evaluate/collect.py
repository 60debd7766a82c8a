"""Send every case to the target, once per scoring method, as given and (for the order-flip rate) reversed."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO, Any

from semif_decision_client import Decision, DecisionRequest

from .cases import Case
from .targets import Answer, Target

DEFAULT_METHOD = "default"  # the label of a run that names no method, when the endpoint does not say its own


@dataclass(frozen=True)
class Scored:
    """One case under one method: the answer to the options as given and, if asked, reversed."""

    case: Case
    given: Answer
    reversed: Answer | None

    @property
    def decision(self) -> Decision:
        return self.given.decision

    @property
    def probabilities(self) -> list[float]:
        """In the case's option order."""
        return [self.decision.probabilities[i] for i in self.case.request.option_ids]

    @property
    def logits(self) -> list[float]:
        """The method's raw scores (`option_logits`), in the case's option order."""
        return [self.decision.logits[i] for i in self.case.request.option_ids]


@dataclass(frozen=True)
class Knobs:
    """What every request of a run carries besides the decision and the method; None: the endpoint's default."""

    temperature: float | None = None
    debias: str | None = None


def reversed_options(request: DecisionRequest) -> DecisionRequest:
    return dataclasses.replace(request, options=tuple(reversed(request.options)))


def audit_line(case: Case, method: str, order: str, answer: Answer) -> str:
    """One line of `--responses`: what was asked and the endpoint's whole answer."""
    return json.dumps({"id": case.id, "line": case.line, "method": method, "order": order,
                       "latency_ms": round(answer.latency_ms, 3), "response": dict(answer.decision.raw)},
                      ensure_ascii=False) + "\n"


def collect(cases: Sequence[Case], target: Target, methods: Sequence[str | None], knobs: Knobs, *,
            flip: bool = True, on_request: Callable[[], Any] = lambda: None,
            audit: IO[str] | None = None) -> dict[str, list[Scored]]:
    """Scored cases per method label: the requested method, or the one the endpoint says it used."""
    results: dict[str, list[Scored]] = {}
    for method in methods:
        label = method
        scored: list[Scored] = []
        for case in cases:
            request = dataclasses.replace(case.request, scoring=method, temperature=knobs.temperature,
                                          debias=knobs.debias)
            given = target.decide(request)
            on_request()
            label = label or given.decision.scoring or DEFAULT_METHOD
            other = None
            if flip:
                other = target.decide(reversed_options(request))
                on_request()
            if audit is not None:
                audit.write(audit_line(case, label, "given", given))
                if other is not None:
                    audit.write(audit_line(case, label, "reversed", other))
            scored.append(Scored(case, given, other))
        results[label or DEFAULT_METHOD] = scored
    return results
