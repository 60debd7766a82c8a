"""An evaluation run: the cases checked, sent to the target under every method asked, the figures computed and
reported, and (`semif calibrate`) the calibration fitted on the fit split.

One job per module of this package: `cases` and `systemone_cases` (reading and checking the labelled file),
`targets` (where decisions are sent), `collect` and `systemone_collect` (sending every case, as given and reversed),
`metrics` and `systemone_metrics` (the figures), `calibration_fit` and `systemone_fit` (the temperature and bias fits
and their document), `report` (text, JSON, reliability diagram).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import BotoCoreError
from tqdm import tqdm

from .calibration_fit import SPLIT_RULE, FitError, calibration_document, check_split, fit_results
from .cases import CaseFile, CasesError, load_cases
from .collect import Knobs, Scored, collect
from .metrics import method_figures
from .report import reliability_plot, systemone_text_report, text_report
from .systemone_cases import (
    QUESTION_TYPES,
    SYSTEMONE,
    SystemOneCaseFile,
    check_methods,
    load_systemone_cases,
)
from .systemone_collect import Answered, collect_systemone
from .systemone_fit import check_question_split, fit_question_results
from .systemone_metrics import systemone_method_figures
from .targets import HttpTarget, Target, TargetError, aws_target, local_target

EXIT_TARGET = 1  # the target is unreachable, refused a case or answered nonsense
EXIT_INPUT = 2  # usage, the cases file, or a calibration that cannot be fitted


def make_target(args: argparse.Namespace) -> Target:
    if args.endpoint_url:
        return HttpTarget(args.endpoint_url)
    if args.local:
        return local_target(args.port, args.prefix)
    return aws_target(args.endpoint, args.region)


def build_document(args: argparse.Namespace, case_file: CaseFile, target: Target,
                   results: dict[str, list[Scored]]) -> dict[str, Any]:
    first = next(iter(results.values()))[0].decision.details
    kinds = Counter(case.kind for case in case_file.cases)
    return {"cases": {"path": str(case_file.path), "sha256": case_file.sha256, "n": len(case_file.cases),
                      "kinds": dict(kinds)},
            "target": target.description,
            "request": {"temperature": args.temperature, "debias": args.debias, "order_flip": not args.no_flip},
            "model": first.get("model"), "prompt": first.get("prompt"),
            "methods": {name: method_figures(scored) for name, scored in results.items()}}


def write_calibration(args: argparse.Namespace, document: dict[str, Any], results: dict[str, list[Scored]]) -> None:
    fits, summary = fit_results(results, debias=args.debias, request_temperature=args.temperature)
    any_method = next(iter(summary.values()))  # every method saw the same cases
    n_fit, n_heldout = any_method["fit_cases"], any_method["heldout_before"]["n"]
    fitted = {"tool": "semif calibrate", "created": datetime.now(UTC).isoformat(),
              "cases": document["cases"]["path"], "cases_sha256": document["cases"]["sha256"],
              "split": SPLIT_RULE, "fit_cases": n_fit, "heldout_cases": n_heldout,
              "target": document["target"], "request": document["request"], "model": document["model"],
              "prompt": document["prompt"], "heldout": summary}
    calibration_json, calibration = calibration_document(fits, fitted)
    args.fit_calibration.write_text(json.dumps(calibration_json, indent=2) + "\n")
    document["calibration_fit"] = {"output": str(args.fit_calibration), "sha256": calibration.sha256,
                                   "split": SPLIT_RULE, "fit_cases": n_fit, "heldout_cases": n_heldout,
                                   "methods": summary}


def run(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, list[Scored]]]:
    """Check the cases, send them all, compute the figures."""
    case_file = load_cases(args.cases)
    if args.fit_calibration:
        check_split([case.id for case in case_file.cases])
    methods: list[str | None] = list(args.scoring) if args.scoring else [None]
    target = make_target(args)
    total = len(case_file.cases) * len(methods) * (1 if args.no_flip else 2)
    audit = args.responses.open("w", encoding="utf-8") if args.responses else None
    try:
        with tqdm(total=total, unit="request", file=sys.stderr, disable=args.no_progress) as bar:
            results = collect(case_file.cases, target, methods, Knobs(args.temperature, args.debias),
                              flip=not args.no_flip, on_request=lambda: bar.update(1), audit=audit)
    finally:
        target.close()
        if audit is not None:
            audit.close()
    return build_document(args, case_file, target, results), results


def build_systemone_document(args: argparse.Namespace, case_file: SystemOneCaseFile, target: Target,
                             results: dict[str, list[Answered]]) -> dict[str, Any]:
    first = next(iter(results.values()))[0]
    prompts = {question.type: answer.get("x_prompt") for question in first.case.labelled
               if isinstance(answer := first.reply.document["answers"][question.id], dict)}
    questions = Counter(question.type for case in case_file.cases for question in case.labelled)
    return {"format": SYSTEMONE,
            "cases": {"path": str(case_file.path), "sha256": case_file.sha256, "n": len(case_file.cases),
                      "questions": {kind: questions[kind] for kind in QUESTION_TYPES if questions[kind]},
                      "kinds": dict(Counter(case.kind for case in case_file.cases))},
            "target": target.description,
            "request": {"model": args.model, "temperature": args.temperature},
            "model": first.reply.document.get("x_model") or first.reply.document.get("model"),
            "prompt": prompts,
            "methods": {name: systemone_method_figures(answered) for name, answered in results.items()}}


def run_systemone(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, list[Answered]]]:
    """Check the System One cases (under every method asked), send them all, compute the figures."""
    case_file = load_systemone_cases(args.cases)
    methods: list[str | None] = list(args.scoring) if args.scoring else [None]
    check_methods(case_file, methods)
    if args.fit_calibration:
        check_question_split(case_file)
    target = make_target(args)
    audit = args.responses.open("w", encoding="utf-8") if args.responses else None
    try:
        with tqdm(total=len(case_file.cases) * len(methods), unit="request", file=sys.stderr,
                  disable=args.no_progress) as bar:
            results = collect_systemone(case_file.cases, target, methods, model=args.model,
                                        temperature=args.temperature, on_request=lambda: bar.update(1), audit=audit)
    finally:
        target.close()
        if audit is not None:
            audit.close()
    return build_systemone_document(args, case_file, target, results), results


def write_systemone_calibration(args: argparse.Namespace, document: dict[str, Any],
                                results: dict[str, list[Answered]]) -> None:
    fits, summary = fit_question_results(results, request_temperature=args.temperature)
    fitted = {"tool": "semif calibrate", "created": datetime.now(UTC).isoformat(),
              "cases": document["cases"]["path"], "cases_sha256": document["cases"]["sha256"],
              "split": SPLIT_RULE, "target": document["target"], "request": document["request"],
              "model": document["model"], "prompt": document["prompt"], "heldout": summary}
    calibration_json, calibration = calibration_document({}, fitted, questions=fits)
    args.fit_calibration.write_text(json.dumps(calibration_json, indent=2) + "\n")
    document["calibration_fit"] = {"output": str(args.fit_calibration), "sha256": calibration.sha256,
                                   "split": SPLIT_RULE, "types": summary}


def plotted(document: dict[str, Any]) -> dict[str, Any]:
    """The reliability diagram's lines: a method's (SemIf), or a method's per question type (System One)."""
    if document.get("format") != SYSTEMONE:
        return document["methods"]
    return {f"{name} {kind}": figures for name, method in document["methods"].items()
            for kind, figures in method["types"].items()}


def evaluate(args: argparse.Namespace) -> int:
    """The figures (and, for `semif calibrate`, the fitted document) for the cases; the exit status."""
    system_one = args.format == SYSTEMONE
    status = 0
    try:
        document, results = run_systemone(args) if system_one else run(args)
    except (CasesError, FitError) as error:
        print(f"evaluate: {error}", file=sys.stderr)
        return EXIT_INPUT
    except (TargetError, BotoCoreError) as error:  # BotoCoreError: no region or credentials for --endpoint
        print(f"evaluate: {error}", file=sys.stderr)
        return EXIT_TARGET
    if args.fit_calibration:
        try:
            (write_systemone_calibration if system_one else write_calibration)(args, document, results)
        except FitError as error:  # the figures are still worth printing and writing
            print(f"evaluate: {error}", file=sys.stderr)
            status = EXIT_INPUT
    print(systemone_text_report(document) if system_one else text_report(document))
    if args.json:
        args.json.write_text(json.dumps(document, indent=2) + "\n")
    if args.plot:
        reliability_plot(plotted(document), args.plot)
    return status
