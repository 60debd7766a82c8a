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
    for name, figures in methods.items():
        rates = ", ".join(f"{code} {rate:.0%}" for code, rate in figures["warning_rates"].items()) or "none"
        calibrated = ", ".join(figures["calibration_sha256"]) or "none"
        lines.append(f"{name}: warnings {rates}; endpoint calibration {calibrated}")
    fit = document.get("calibration_fit")
    if fit:
        lines += ["", f"calibration fitted on {fit['fit_cases']} cases, checked on {fit['heldout_cases']} held out "
                      f"({fit['split']}); written to {fit['output']} (sha256 {fit['sha256'][:12]})"]
        rows = []
        for name, entry in fit["methods"].items():
            before, after = entry["heldout_before"], entry["heldout_after"]
            rows.append([name, f"{entry['parameters']['temperature']:.3f}",
                         *(f"{before[k]:.3f} -> {after[k]:.3f}" for k in SPLIT_FIGURES)])
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
