"""The figures of one scoring method on labelled cases (definitions in `semif evaluate --help`).

The predicted option is the most probable one; a tie goes to the option listed first, as the decision client's
`Decision.best` does. Everything here is plain arithmetic on the answers, so a test can recompute it by hand.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from ..common.stats import summarize
from .collect import Scored

ECE_BINS = 10
NLL_FLOOR = 1e-300  # a probability that underflowed to 0 still gives a finite log-loss

Rows = Sequence[Sequence[float]]  # per case, the probabilities in the case's option order


def top(row: Sequence[float]) -> int:
    """Index of the most probable option; the first one listed on a tie."""
    return max(range(len(row)), key=lambda i: (row[i], -i))


def accuracy(rows: Rows, gold: Sequence[int]) -> float:
    return sum(top(row) == g for row, g in zip(rows, gold, strict=True)) / len(rows)


def mean_confidence(rows: Rows) -> float:
    return sum(max(row) for row in rows) / len(rows)


def brier(rows: Rows, gold: Sequence[int]) -> float:
    """Mean over cases of the sum over options of (p - 1[gold])^2: 0 is perfect, 2 the worst."""
    return sum(sum((p - (i == g)) ** 2 for i, p in enumerate(row)) for row, g in zip(rows, gold, strict=True)) \
        / len(rows)


def log_loss(rows: Rows, gold: Sequence[int]) -> float:
    """Mean negative log-probability of the gold option (what the calibration fit minimises)."""
    return -sum(math.log(max(row[g], NLL_FLOOR)) for row, g in zip(rows, gold, strict=True)) / len(rows)


def reliability(rows: Rows, gold: Sequence[int], bins: int = ECE_BINS) -> list[dict[str, float | int]]:
    """Equal-width bins of the top probability: count, mean confidence and accuracy of each (empty bins too)."""
    members: list[list[tuple[float, bool]]] = [[] for _ in range(bins)]
    for row, g in zip(rows, gold, strict=True):
        confidence = max(row)
        members[min(int(confidence * bins), bins - 1)].append((confidence, top(row) == g))
    table = []
    for index, inside in enumerate(members):
        count = len(inside)
        table.append({"lower": index / bins, "upper": (index + 1) / bins, "count": count,
                      "confidence": sum(c for c, _ in inside) / count if count else 0.0,
                      "accuracy": sum(ok for _, ok in inside) / count if count else 0.0})
    return table


def ece(rows: Rows, gold: Sequence[int], bins: int = ECE_BINS) -> float:
    """Expected calibration error: sum over bins of (share of cases) x |accuracy - mean confidence|."""
    return sum(b["count"] / len(rows) * abs(b["accuracy"] - b["confidence"]) for b in reliability(rows, gold, bins))


def macro_f1(predicted: Sequence[str], gold: Sequence[str]) -> float:
    """Unweighted mean F1 over every option id that is some case's gold or prediction (labels are option ids)."""
    true_pos: Counter[str] = Counter()
    false_pos: Counter[str] = Counter()
    false_neg: Counter[str] = Counter()
    for p, g in zip(predicted, gold, strict=True):
        if p == g:
            true_pos[g] += 1
        else:
            false_pos[p] += 1
            false_neg[g] += 1
    labels = set(predicted) | set(gold)
    return sum(2 * true_pos[x] / (2 * true_pos[x] + false_pos[x] + false_neg[x]) for x in labels) / len(labels)


def order_flip_rate(scored: Sequence[Scored]) -> float | None:
    """Share of cases whose top option id changes when the options are listed in reverse; None if not run."""
    pairs = [(s.decision.best, s.reversed.decision.best) for s in scored if s.reversed is not None]
    if not pairs:
        return None
    return sum(given != reversed_ for given, reversed_ in pairs) / len(pairs)


def separation(positives: Sequence[float], negatives: Sequence[float]) -> float | None:
    """The chance that a positive case scores above a negative one (ties count half): the area under the ROC curve.
    Any increasing rescaling of the scores keeps it, so it is the signal that no calibration can add or remove."""
    if not positives or not negatives:
        return None
    above = sum((p > n) + 0.5 * (p == n) for p in positives for n in negatives)
    return above / (len(positives) * len(negatives))


def p50(samples: Sequence[float]) -> float | None:
    return summarize(samples).get("p50") if samples else None


def accuracy_by(rows: Rows, gold: Sequence[int], labels: Sequence[str]) -> dict[str, dict[str, float | int]]:
    """Accuracy and count per label (a case's kind, a question), labels sorted."""
    members: defaultdict[str, list[int]] = defaultdict(list)
    for index, label in enumerate(labels):
        members[label].append(index)
    return {label: {"n": len(indices), "accuracy": accuracy([rows[i] for i in indices], [gold[i] for i in indices])}
            for label, indices in sorted(members.items())}


def method_figures(scored: Sequence[Scored]) -> dict[str, Any]:
    """Every figure of one method, under the names `--json` writes."""
    rows = [s.probabilities for s in scored]
    gold = [s.case.gold_index for s in scored]
    answers = [a for s in scored for a in (s.given, s.reversed) if a is not None]
    server_ms = [float(a.decision.details["timing"]["total_ms"]) for a in answers
                 if "total_ms" in a.decision.details.get("timing", {})]
    warned: Counter[str] = Counter(code for s in scored for code in set(s.decision.warnings))
    calibrations = sorted({str(s.decision.calibration.get("sha256")) for s in scored if s.decision.calibration})
    return {
        "n": len(scored),
        "accuracy": accuracy(rows, gold),
        "chance_accuracy": sum(1 / len(row) for row in rows) / len(rows),
        "macro_f1": macro_f1([s.decision.best for s in scored], [s.case.gold for s in scored]),
        "order_flip_rate": order_flip_rate(scored),
        "ece": ece(rows, gold),
        "brier": brier(rows, gold),
        "log_loss": log_loss(rows, gold),
        "mean_confidence": mean_confidence(rows),
        "p50_latency_ms": p50([a.latency_ms for a in answers]),
        "p50_server_ms": p50(server_ms),
        "per_kind": accuracy_by(rows, gold, [s.case.kind for s in scored]),
        "warning_rates": {code: count / len(scored) for code, count in sorted(warned.items())},
        "calibration_sha256": calibrations,
        "reliability": reliability(rows, gold),
    }
