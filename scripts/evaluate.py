"""Measure decision quality on labelled cases: accuracy, macro-F1, order flips, calibration, latency.

    python -m scripts.evaluate CASES.jsonl --endpoint-url http://127.0.0.1:8080     # a container directly
    python -m scripts.evaluate CASES.jsonl --local [--port 8080]                     # the local gateway
    python -m scripts.evaluate CASES.jsonl --endpoint semif-prod-decision            # AWS (boto3)
        [--scoring letters,likelihood,pmi] [--json OUT.json] [--plot OUT.png] [--fit-calibration CAL.json]

Cases are JSON Lines `{"decision": {...}, "gold": "<option id>", "kind": "...", "note": "..."}` (kind and
note optional). Every case is sent once per method with its options as given and once reversed.
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
from .evaluation.report import reliability_plot, text_report
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
    where = parser.add_argument_group("target (exactly one)").add_mutually_exclusive_group(required=True)
    where.add_argument("--endpoint-url", metavar="URL", help="a decision container: POST URL/invocations")
    where.add_argument("--local", action="store_true", help="the local gateway (scripts/local_endpoints.py)")
    where.add_argument("--endpoint", metavar="NAME", help="a SageMaker decision endpoint (boto3's credentials)")
    parser.add_argument("--port", type=int, default=LOCAL_PORT, help="with --local: gateway port (%(default)s)")
    parser.add_argument("--prefix", default=LOCAL_PREFIX, help="with --local: endpoint name prefix (%(default)s)")
    parser.add_argument("--region", help="with --endpoint: AWS region (default: boto3's)")
    parser.add_argument("--scoring", type=methods_list, metavar="M[,M...]",
                        help=f"methods to compare ({', '.join(SCORING_METHODS)}); default: send none, so the "
                             "endpoint's SEMIF_SCORING applies")
    parser.add_argument("--temperature", type=positive, help="request temperature (default: the endpoint's, 1)")
    parser.add_argument("--debias", choices=DEBIAS_MODES, help="request debias (default: the endpoint's, none)")
    parser.add_argument("--no-flip", action="store_true", help="skip the reversed-order requests (half the "
                                                                  "cost; no order_flip_rate)")
    parser.add_argument("--json", type=Path, metavar="OUT", help="write every figure as JSON")
    parser.add_argument("--plot", type=Path, metavar="OUT.png", help="write a reliability diagram")
    parser.add_argument("--responses", type=Path, metavar="OUT.jsonl", help="write every raw answer (audit)")
    parser.add_argument("--fit-calibration", type=Path, metavar="OUT.json",
                        help="fit a calibration on the fit split and write the SEMIF_CALIBRATION document")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
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


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    status = 0
    try:
        document, results = run(args)
    except (CasesError, FitError) as error:
        print(f"evaluate: {error}", file=sys.stderr)
        return EXIT_INPUT
    except (TargetError, BotoCoreError) as error:  # BotoCoreError: no region or credentials for --endpoint
        print(f"evaluate: {error}", file=sys.stderr)
        return EXIT_TARGET
    if args.fit_calibration:
        try:
            write_calibration(args, document, results)
        except FitError as error:  # the figures are still worth printing and writing
            print(f"evaluate: {error}", file=sys.stderr)
            status = EXIT_INPUT
    print(text_report(document))
    if args.json:
        args.json.write_text(json.dumps(document, indent=2) + "\n")
    if args.plot:
        reliability_plot(document["methods"], args.plot)
    return status


if __name__ == "__main__":
    sys.exit(main())
