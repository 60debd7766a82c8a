"""Measure decision quality on labelled cases: accuracy, macro-F1, order flips, calibration, latency.

    semif evaluate CASES.jsonl --endpoint-url http://127.0.0.1:8080     # a container directly
    semif evaluate CASES.jsonl --local [--port 8080]                     # the local gateway
    semif evaluate CASES.jsonl --endpoint semif-prod-decision            # AWS (boto3)
        [--scoring letters,likelihood,pmi] [--json OUT.json] [--plot OUT.png]
    semif evaluate tests/data/systemone.jsonl --endpoint-url http://127.0.0.1:8080 --scoring pmi

SemIf cases are JSON Lines `{"decision": {...}, "gold": "<option id>", "kind": "...", "note": "..."}` (kind and
note optional); every case is sent once per method with its options as given and once reversed. System One cases
are `{"id": "...", "state": ..., "questions": {id: question}, "gold": {id: answer}, "kind": "...", "note": "..."}`
(gold: a choice's option name, a noul's true or false, a score's level index; id, kind and note optional), each
sent once per method as a System One request: POST URL/v1/systemone, or the same body through /invocations.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from semif_adapter.core.calibration import SCORING_METHODS
from semif_decision_client import DEBIAS_MODES

from ..common.command import Subparsers, UsageError, add_command
from ..common.discovery import LOCAL_PORT, LOCAL_PREFIX
from .calibration_fit import SPLIT_RULE
from .systemone_cases import DEFAULT_MODEL, SEMIF, SYSTEMONE, detect_format

CALIBRATE = """Fit a SEMIF_CALIBRATION document on labelled cases (held-out split by decision id) and print the figures
before and after.

    semif calibrate cases.jsonl -o calibration.json --local --scoring letters,pmi
    semif calibrate cases.jsonl -o calibration.json --endpoint-url http://127.0.0.1:8080
"""
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
  log_loss          mean of -ln p(gold) (what `semif calibrate` minimises)
  mean_confidence   mean top probability; compare with accuracy: above it = overconfident
  p50_latency_ms    median round trip of the method's requests as this tool saw them (given and reversed);
                    p50_server_ms is the median of the adapter's own timing.total_ms
  per_kind          accuracy per "kind" of case; warning_rates: share of cases whose answer carried each code

calibration (`semif calibrate CASES -o OUT.json`): cases are split by decision id alone: {SPLIT_RULE}. A temperature per
method (for letters without permute also a bias per slot A, B, ..., as in contextual calibration) is fitted on
the rest by minimising the log-loss of the gold option, and checked on the held-out cases: before = the
probabilities the endpoint served, after = the fitted calibration applied to the raw option_logits. The file
is a SEMIF_CALIBRATION document (semif_adapter.core.calibration), with provenance under "fitted".

System One cases (detected by their `questions` key, or --format systemone): figures per question type and
method. Every question is a distribution over its answers (choice: the options; noul: yes, no; score: the levels)
and the figures above apply to it (accuracy: the most probable answer is the gold one; noul: p(yes) >= 0.5 is
yes; score: the most probable level); besides them:
  noul              yes_rate (share of answers p(yes) >= 0.5), gold_yes_share, and the mean p(yes) on the
                    questions whose gold is yes (p_yes|yes) and no (p_yes|no): a method biased to yes has a
                    yes_rate far above gold_yes_share and close means; brier sums over both answers, 2(p - y)^2;
                    auc: the chance that a gold-yes question gets a higher p(yes) than a gold-no one (0.5: no
                    signal, which no calibration can add), auc_in_q: the same within each question, averaged
  score             mae: mean |score - gold level|, score being the answer's expected level sum i * p_i
  per_question      accuracy per "kind/question id"
calibration of System One questions (`semif calibrate`): per type and method, on the raw x_option_logits of
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


def _arguments(parser: argparse.ArgumentParser) -> None:
    """Evaluate's options, which calibrate shares: the cases, the target, the request, the outputs."""
    parser.add_argument("cases", type=Path, help="labelled cases, JSON Lines")
    parser.add_argument("--format", choices=("auto", SEMIF, SYSTEMONE), default="auto",
                        help="the cases' contract (default auto: System One when the first case has 'questions')")
    where = parser.add_argument_group("target (exactly one)").add_mutually_exclusive_group(required=True)
    where.add_argument("--endpoint-url", metavar="URL", help="a decision container: POST URL/invocations (System "
                                                               "One cases: URL/v1/systemone)")
    where.add_argument("--local", action="store_true", help="the local gateway (semif local)")
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
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def add_parser(subparsers: Subparsers) -> None:
    evaluate = add_command(subparsers, "evaluate", __doc__, epilog=DEFINITIONS,
                           summary="decision quality on labelled cases: accuracy, order flips, calibration")
    _arguments(evaluate)
    evaluate.set_defaults(fit_calibration=None)
    calibrate = add_command(subparsers, "calibrate", CALIBRATE, epilog=DEFINITIONS,
                            summary="fit a calibration on labelled cases and show it on the held-out ones")
    _arguments(calibrate)
    calibrate.add_argument("-o", "--output", dest="fit_calibration", type=Path, required=True,
                           metavar="CALIBRATION.json", help="the fitted SEMIF_CALIBRATION document")


def validate(args: argparse.Namespace) -> None:
    """The options together, once --format auto is settled from the first case."""
    if args.format == "auto":
        args.format = detect_format(args.cases)
    if args.format == SYSTEMONE and args.debias:
        raise UsageError("--debias applies to SemIf decisions only (a System One request has no such knob)")
    if args.format == SEMIF and args.model != DEFAULT_MODEL:
        raise UsageError("--model applies to System One cases only")
    if not args.local and (args.port != LOCAL_PORT or args.prefix != LOCAL_PREFIX):
        raise UsageError("--port and --prefix apply to --local only")
    if args.region and not args.endpoint:
        raise UsageError("--region applies to --endpoint only")
    if args.debias == "permute" and any(method != "letters" for method in args.scoring or []):
        raise UsageError("--debias permute applies to letters only (the other methods score each option's text, "
                         "whatever its position)")


def run(args: argparse.Namespace) -> int:
    from .runner import evaluate

    return evaluate(args)
