"""Measure decision quality on labelled cases: accuracy, macro-F1, order flips, calibration, latency.

    python -m scripts.evaluate CASES.jsonl --endpoint-url http://127.0.0.1:8080     # a container directly
    python -m scripts.evaluate CASES.jsonl --local [--port 8080]                     # the local gateway
    python -m scripts.evaluate CASES.jsonl --endpoint semif-prod-decision            # AWS (boto3)
        [--scoring letters,likelihood,pmi] [--json OUT.json] [--plot OUT.png] [--fit-calibration CAL.json]
    python -m scripts.evaluate tests/data/systemone.jsonl --endpoint-url http://127.0.0.1:8080 --scoring pmi

SemIf cases are JSON Lines `{"decision": {...}, "gold": "<option id>", "kind": "...", "note": "..."}` (kind and
note optional); every case is sent once per method with its options as given and once reversed. System One cases
are `{"id": "...", "state": ..., "questions": {id: question}, "gold": {id: answer}, "kind": "...", "note": "..."}`
(gold: a choice's option name, a noul's true or false, a score's level index; id, kind and note optional), each
sent once per method as a System One request: POST URL/v1/systemone, or the same body through /invocations.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError
from tqdm import tqdm

from semif_adapter.calibration import SCORING_METHODS
from semif_decision_client import DEBIAS_MODES

from .evaluation.calibration_fit import SPLIT_RULE, FitError, calibration_document, check_split, fit_results
from .evaluation.cases import CaseFile, CasesError, load_cases
from .evaluation.collect import Knobs, Scored, collect
from .evaluation.metrics import method_figures
from .evaluation.report import reliability_plot, systemone_text_report, text_report
from .evaluation.systemone_cases import (
    DEFAULT_MODEL,
    QUESTION_TYPES,
    SEMIF,
    SYSTEMONE,
    SystemOneCaseFile,
    check_methods,
    detect_format,
    load_systemone_cases,
)
from .evaluation.systemone_collect import Answered, collect_systemone
from .evaluation.systemone_fit import check_question_split, fit_question_results
from .evaluation.systemone_metrics import systemone_method_figures
from .evaluation.targets import HttpTarget, Target, TargetError, aws_target, local_target
from .smoke import LOCAL_PORT, LOCAL_PREFIX
from .usage import command_parser

EXIT_TARGET = 1  # the target is unreachable, refused a case or answered nonsense
EXIT_INPUT = 2  # usage, the cases file, or a calibration that cannot be fitted

DEFINITIONS = f"""\
figures (per method; --json writes them under these names):
  accuracy          share of cases whose most probable option is the gold one (a tie goes to the option
                    listed first); chance_accuracy is the mean of 1/(number of options)
  macro_f1          the unweighted mean, over every option id that is some case's gold or prediction, of
                    F1 = 2TP / (2TP + FP + FN); labels are option ids, pooled across cases (the "yes" of two
                    policy checks is one label)
  order_flip_rate   share of cases whose top option id changes when the same options are sent in reverse
                    order (0 for an order-invariant method; - with --no-flip)
  ece               expected calibration error: the top probability is put in 10 equal-width bins
                    ([0, 0.1), ..., [0.9, 1]); ECE = sum over bins of (cases in bin / cases) x
                    |accuracy in bin - mean top probability in bin|
  brier             mean over cases of the sum over options of (p - 1[option is gold])^2 (0 best, 2 worst)
  log_loss          mean of -ln p(gold) (what --fit-calibration minimises)
  mean_confidence   mean top probability; compare with accuracy: above it = overconfident
  p50_latency_ms    median round trip of the method's requests as this tool saw them (given and reversed);
                    p50_server_ms is the median of the adapter's own timing.total_ms
  per_kind          accuracy per "kind" of case; warning_rates: share of cases whose answer carried each code

calibration (--fit-calibration OUT.json): cases are split by decision id alone: {SPLIT_RULE}. A temperature per
method (for letters without permute also a bias per slot A, B, ..., as in contextual calibration) is fitted on
the rest by minimising the log-loss of the gold option, and checked on the held-out cases: before = the
probabilities the endpoint served, after = the fitted calibration applied to the raw option_logits. The file
is a SEMIF_CALIBRATION document (semif_adapter.calibration), with provenance under "fitted".

System One cases (detected by their `questions` key, or --format systemone): figures per question type and
method. Every question is a distribution over its answers (choice: the options; noul: yes, no; score: the levels)
and the figures above apply to it (accuracy: the most probable answer is the gold one; noul: p(yes) >= 0.5 is
yes; score: the most probable level); besides them:
  noul              yes_rate (share of answers p(yes) >= 0.5), gold_yes_share, and the mean p(yes) on the
                    questions whose gold is yes (p_yes|yes) and no (p_yes|no): a method biased to yes has a
                    yes_rate far above gold_yes_share and close means; brier sums over both answers, 2(p - y)^2
  score             mae: mean |score - gold level|, score being the answer's expected level sum i * p_i
  per_question      accuracy per "kind/question id"
calibration of System One questions (--fit-calibration): per type and method, on the raw x_option_logits of
the fit split (the same split, by case id): choice a temperature; noul a temperature and a bias b,
p(yes) = sigmoid((s_true - s_false) / T + b) (Platt scaling); score a temperature and a tilt b,
calibrated_i = s_i / T + b (i / (n - 1) - 0.5). Written under "questions" in the SEMIF_CALIBRATION document.

exit status: 0 done; 1 the target is unreachable or refused a case; 2 usage, a malformed cases file (with its
line number), or a calibration that cannot be fitted.
"""


def methods_list(text: str) -> list[str]:
    methods = [m.strip() for m in text.split(",") if m.strip()]
    unknown = [m for m in methods if m not in SCORING_METHODS]
    if unknown or not methods or len(set(methods)) != len(methods):
        raise argparse.ArgumentTypeError(f"expected distinct methods among {', '.join(SCORING_METHODS)}, got {text!r}")
    return methods


def positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}")
    return value


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = command_parser(__doc__, "evaluate", epilog=DEFINITIONS)
    parser.add_argument("cases", type=Path, help="labelled cases, JSON Lines")
    parser.add_argument("--format", choices=("auto", SEMIF, SYSTEMONE), default="auto",
                        help="the cases' contract (default auto: System One when the first case has 'questions')")
    where = parser.add_argument_group("target (exactly one)").add_mutually_exclusive_group(required=True)
    where.add_argument("--endpoint-url", metavar="URL", help="a decision container: POST URL/invocations (System "
                                                               "One cases: URL/v1/systemone)")
    where.add_argument("--local", action="store_true", help="the local gateway (scripts/local_endpoints.py)")
    where.add_argument("--endpoint", metavar="NAME", help="a SageMaker decision endpoint (boto3's credentials)")
    parser.add_argument("--port", type=int, default=LOCAL_PORT, help="with --local: gateway port (%(default)s)")
    parser.add_argument("--prefix", default=LOCAL_PREFIX, help="with --local: endpoint name prefix (%(default)s)")
    parser.add_argument("--region", help="with --endpoint: AWS region (default: boto3's)")
    parser.add_argument("--scoring", type=methods_list, metavar="M[,M...]",
                        help=f"methods to compare ({', '.join(SCORING_METHODS)}); default: send none, so the "
                             "endpoint's SEMIF_SCORING applies")
    parser.add_argument("--temperature", type=positive, help="request temperature (System One: x_temperature; "
                                                             "default: the endpoint's, 1)")
    parser.add_argument("--model", default=DEFAULT_MODEL, help="System One cases: the request's model "
                                                              "(%(default)s)")
    parser.add_argument("--debias", choices=DEBIAS_MODES, help="request debias (default: the endpoint's, none)")
    parser.add_argument("--no-flip", action="store_true", help="skip the reversed-order requests (half the "
                                                                  "cost; no order_flip_rate; System One cases are "
                                                                  "sent once anyway)")
    parser.add_argument("--json", type=Path, metavar="OUT", help="write every figure as JSON")
    parser.add_argument("--plot", type=Path, metavar="OUT.png", help="write a reliability diagram")
    parser.add_argument("--responses", type=Path, metavar="OUT.jsonl", help="write every raw answer (audit)")
    parser.add_argument("--fit-calibration", type=Path, metavar="OUT.json",
                        help="fit a calibration on the fit split and write the SEMIF_CALIBRATION document")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    if args.format == "auto":
        args.format = detect_format(args.cases)
    if args.format == SYSTEMONE and args.debias:
        parser.error("--debias applies to SemIf decisions only (a System One request has no such knob)")
    if args.format == SEMIF and args.model != DEFAULT_MODEL:
        parser.error("--model applies to System One cases only")
    if not args.local and (args.port != LOCAL_PORT or args.prefix != LOCAL_PREFIX):
        parser.error("--port and --prefix apply to --local only")
    if args.region and not args.endpoint:
        parser.error("--region applies to --endpoint only")
    if args.debias == "permute" and any(method != "letters" for method in args.scoring or []):
        parser.error("--debias permute applies to letters only (the other methods score each option's text, "
                     "whatever its position)")
    return args


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
    fitted = {"tool": "python -m scripts.evaluate --fit-calibration", "created": datetime.now(UTC).isoformat(),
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
    fitted = {"tool": "python -m scripts.evaluate --fit-calibration", "created": datetime.now(UTC).isoformat(),
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


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
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


if __name__ == "__main__":
    sys.exit(main())
