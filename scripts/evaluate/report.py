"""The evaluator's output: the printed tables, the `--json` document and the `--plot` reliability diagram."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

COLUMNS = (("n", "n", "{:d}"), ("accuracy", "accuracy", "{:.3f}"), ("chance_accuracy", "chance", "{:.3f}"),
           ("macro_f1", "macro_f1", "{:.3f}"), ("order_flip_rate", "order_flip", "{:.3f}"),
           ("ece", "ece", "{:.3f}"), ("brier", "brier", "{:.3f}"), ("mean_confidence", "mean_conf", "{:.3f}"),
           ("p50_latency_ms", "p50_ms", "{:.1f}"))
SPLIT_FIGURES = ("accuracy", "ece", "brier", "log_loss")


def _cell(value: Any, form: str) -> str:
    return "-" if value is None else form.format(value)


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    return ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths,
                                                                                                     strict=True)))
            for row in [header, *rows]]


def _warnings_line(label: str, figures: Mapping[str, Any]) -> str:
    rates = ", ".join(f"{code} {rate:.0%}" for code, rate in figures["warning_rates"].items()) or "none"
    calibrated = ", ".join(figures["calibration_sha256"]) or "none"
    return f"{label}: warnings {rates}; endpoint calibration {calibrated}"


def _before_after(entry: Mapping[str, Any]) -> list[str]:
    """A fit's held-out figures, as served -> as refitted."""
    before, after = entry["heldout_before"], entry["heldout_after"]
    return [f"{before[k]:.3f} -> {after[k]:.3f}" for k in SPLIT_FIGURES]


def _fit_heading(fit: Mapping[str, Any], fitted_on: str) -> list[str]:
    return ["", f"calibration fitted {fitted_on} ({fit['split']}); written to {fit['output']} "
                f"(sha256 {fit['sha256'][:12]})"]


def text_report(document: Mapping[str, Any]) -> str:
    """What the evaluator prints: one row per method, accuracy per kind, warnings, the calibration fit."""
    methods: Mapping[str, Mapping[str, Any]] = document["methods"]
    cases = document["cases"]
    lines = [f"{cases['n']} cases from {cases['path']} ({len(cases['kinds'])} kinds), target {document['target']}"]
    lines += _table(["method", *(label for _, label, _ in COLUMNS)],
                    [[name, *(_cell(figures[key], form) for key, _, form in COLUMNS)]
                     for name, figures in methods.items()])
    kinds = sorted(cases["kinds"])
    lines += ["", "accuracy per kind:"]
    lines += _table(["kind", "n", *methods], [[kind, str(cases["kinds"][kind]),
                                                *(f"{figures['per_kind'][kind]['accuracy']:.3f}"
                                                  for figures in methods.values())] for kind in kinds])
    lines += [_warnings_line(name, figures) for name, figures in methods.items()]
    fit = document.get("calibration_fit")
    if fit:
        lines += _fit_heading(fit, f"on {fit['fit_cases']} cases, checked on {fit['heldout_cases']} held out")
        rows = [[name, f"{entry['parameters']['temperature']:.3f}", *_before_after(entry)]
                for name, entry in fit["methods"].items()]
        lines += _table(["method", "T", *(f"held-out {k}" for k in SPLIT_FIGURES)], rows)
        lines += [f"{name}: the scores carried no usable signal on the fit split (best 1/T <= 0), so T is held at its "
                  "maximum and only the slot biases (if any) move the probabilities"
                  for name, entry in fit["methods"].items() if entry["temperature_at_bound"]]
    return "\n".join(lines)


def reliability_plot(methods: Mapping[str, Mapping[str, Any]], path: Path) -> None:
    """Accuracy against confidence per bin of the top probability, one line per method, with the bins' counts."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (upper, lower) = plt.subplots(2, 1, figsize=(6.5, 7.5), sharex=True,
                                          gridspec_kw={"height_ratios": [3, 1]})
    upper.plot([0, 1], [0, 1], linestyle="--", color="grey", linewidth=1, label="perfectly calibrated")
    width = 0.1 / max(len(methods), 1)
    for index, (name, figures) in enumerate(methods.items()):
        bins = [b for b in figures["reliability"] if b["count"]]
        upper.plot([b["confidence"] for b in bins], [b["accuracy"] for b in bins], marker="o",
                   label=f"{name} (ECE {figures['ece']:.3f}, accuracy {figures['accuracy']:.3f})")
        lower.bar([b["lower"] + (index + 0.5) * width for b in figures["reliability"]],
                  [b["count"] for b in figures["reliability"]], width=width, label=name)
    upper.set(xlim=(0, 1), ylim=(0, 1), ylabel="accuracy of the top option",
              title="Reliability diagram (10 equal-width bins of the top probability)")
    upper.legend(loc="upper left", fontsize=8)
    lower.set(xlabel="top probability (confidence)", ylabel="cases")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


# System One: one table per question type (its own columns), then accuracy per kind and per question.
SHARED_COLUMNS = (("n", "n", "{:d}"), ("accuracy", "accuracy", "{:.3f}"))
CHANCE_COLUMN = ("chance_accuracy", "chance", "{:.3f}")
CALIBRATION_COLUMNS = (("ece", "ece", "{:.3f}"), ("brier", "brier", "{:.3f}"), ("log_loss", "log_loss", "{:.3f}"),
                       ("mean_confidence", "mean_conf", "{:.3f}"))
TYPE_COLUMNS = {
    "choice": (*SHARED_COLUMNS, CHANCE_COLUMN, *CALIBRATION_COLUMNS),
    "noul": (*SHARED_COLUMNS, *CALIBRATION_COLUMNS, ("yes_rate", "yes_rate", "{:.3f}"),
             ("gold_yes_share", "gold_yes", "{:.3f}"), ("mean_p_yes_gold_yes", "p_yes|yes", "{:.3f}"),
             ("mean_p_yes_gold_no", "p_yes|no", "{:.3f}"), ("auc", "auc", "{:.3f}"),
             ("auc_within_question", "auc_in_q", "{:.3f}")),
    "score": (*SHARED_COLUMNS, CHANCE_COLUMN, ("mae", "mae", "{:.3f}"), *CALIBRATION_COLUMNS),
}


def _accuracy_table(label: str, key: str, kind: str, methods: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Accuracy per `per_kind` or `per_question` entry of one type, a column per method."""
    entries = next(iter(methods.values()))["types"][kind][key]
    return _table([label, "n", *methods], [[name, str(entry["n"]),
                                            *(f"{figures['types'][kind][key][name]['accuracy']:.3f}"
                                              for figures in methods.values())]
                                           for name, entry in entries.items()])


def systemone_text_report(document: Mapping[str, Any]) -> str:
    """What the evaluator prints for System One cases: per question type, a row per method; then per kind and per
    question; warnings, latency and the calibration fit."""
    methods: Mapping[str, Mapping[str, Any]] = document["methods"]
    cases = document["cases"]
    counts = ", ".join(f"{kind} {n}" for kind, n in cases["questions"].items())
    lines = [f"{cases['n']} cases, {sum(cases['questions'].values())} questions ({counts}) from {cases['path']} "
             f"({len(cases['kinds'])} kinds), target {document['target']}"]
    kinds = list(cases["questions"])
    for kind in kinds:
        columns = TYPE_COLUMNS[kind]
        lines += ["", f"{kind}:"]
        lines += _table(["method", *(label for _, label, _ in columns)],
                        [[name, *(_cell(figures["types"][kind][key], form) for key, _, form in columns)]
                         for name, figures in methods.items()])
        lines += ["", f"{kind} accuracy per kind:", *_accuracy_table("kind", "per_kind", kind, methods)]
        lines += ["", f"{kind} accuracy per question:", *_accuracy_table("kind/question", "per_question", kind,
                                                                          methods)]
    lines.append("")
    for name, figures in methods.items():
        lines += [_warnings_line(f"{name} {kind}", figures["types"][kind]) for kind in kinds]
        lines.append(f"{name}: p50 latency {_cell(figures['p50_latency_ms'], '{:.1f}')} ms per request "
                     f"(server {_cell(figures['p50_server_ms'], '{:.1f}')} ms)")
    fit = document.get("calibration_fit")
    if fit:
        lines += _fit_heading(fit, "per question type on the fit split, checked on the held-out cases")
        rows = [[f"{kind} {name}", str(entry["fit_questions"]), str(entry["heldout_before"]["n"]),
                 f"{entry['parameters']['temperature']:.3f}", _cell(entry["parameters"].get("bias"), "{:+.3f}"),
                 *_before_after(entry)]
                for kind, table in fit["types"].items() for name, entry in table.items()]
        lines += _table(["type method", "fit", "held out", "T", "bias", *(f"held-out {k}" for k in SPLIT_FIGURES)],
                        rows)
        lines += [f"{kind} {name}: the scores carried no usable signal on the fit split (best 1/T <= 0), so T is "
                  "held at its maximum and only the bias (if any) moves the probabilities"
                  for kind, table in fit["types"].items() for name, entry in table.items()
                  if entry["temperature_at_bound"]]
    return "\n".join(lines)
