"""System One request bodies for the benchmark, generated deterministically from an index.

The states are the decision benchmark's own (`workload.state_text`: tickets of about 30, 300 or 1500 tokens), so a
new index is a state no system has seen. The questions are a fixed bank of all three types, asked in the bank's
order, so a request with k questions asks the first k and each extra question is the same one at every k. Every
body is accepted by every System One server here (choices of at most 16 options), except the option sweep, whose
64 and 255 options some servers refuse by design.
"""

from __future__ import annotations

from typing import Any

from bench.common.workload import OPTION_IDS, OPTION_TEXTS, option_list, state_text

MODEL = "jev-latest"  # the SDKs' default name, accepted by every server here

QUESTION_BANK: tuple[tuple[str, dict[str, Any]], ...] = (
    ("team", {"type": "choice", "instructions": "Which team should own this case?",
              "criteria": {"billing": "Charges, invoices, refunds and payment terms",
                           "logistics": "Parcels, carriers, warehouses and deliveries",
                           "support": "Answers questions and calls customers back",
                           "risk": "Fraud checks, disputes and collections"}}),
    ("refund_asked", {"type": "noul", "instructions": "Does the customer ask for money back?"}),
    ("urgency", {"type": "score", "instructions": "How urgent is this case for the operations team?",
                 "criteria": ["Can wait more than a week", "Within a few days", "Today", "Right now"]}),
    ("may_cancel", {"type": "noul", "instructions": "Is the customer likely to cancel the account?",
                    "criteria": None}),
    ("next_step", {"type": "choice", "instructions": "What should support do next?",
                   "criteria": {OPTION_IDS[i]: OPTION_TEXTS[i] for i in range(8)}}),
    ("anger", {"type": "score", "instructions": "How angry does the customer sound?",
               "criteria": ["Calm", "Mildly annoyed", "Clearly frustrated", "Angry", "Furious"]}),
    ("damaged", {"type": "noul", "instructions": "Did the goods arrive damaged?",
                 "criteria": {"true": "The parcel or its contents were damaged on arrival"}}),
    ("fault", {"type": "choice", "instructions": "Who is at fault for the delay?",
               "criteria": {"carrier": None, "warehouse": None, "customer": None}}),
)
# Qualifiers that turn the 16 option texts into up to 16 x 16 distinct options (the option sweep goes to 255).
VARIANTS = ("", "by email", "by phone", "today", "this week", "with a manager", "in writing", "after a check",
            "for a loyal customer", "for a new customer", "with a voucher", "without a voucher", "from Lyon",
            "from Porto", "as an exception", "as usual")
THROUGHPUT_QUESTIONS = 3  # team (choice of 4), refund_asked (noul), urgency (score of 4): a triage request


def state(size: str, index: int) -> str:
    return state_text(size, index)


def questions_body(size: str, state_index: int, count: int) -> dict[str, Any]:
    """One state and the bank's first `count` questions."""
    if not 1 <= count <= len(QUESTION_BANK):
        raise ValueError(f"1 to {len(QUESTION_BANK)} questions, not {count}")
    return {"model": MODEL, "state": state(size, state_index), "questions": dict(QUESTION_BANK[:count])}


PRIMING_QUESTION = {"type": "noul", "instructions": "Is this text written in English?"}  # asked by no measured body


def priming_body(body: dict[str, Any]) -> dict[str, Any]:
    """A question about the body's state that the body does not ask: the server reads the state (and may keep
    it), but has no answer to any of the body's questions yet."""
    return {"model": MODEL, "state": body["state"], "questions": {"priming": PRIMING_QUESTION}}


def option_names(count: int) -> dict[str, str]:
    """`count` options, named and described distinctly: the 16 option texts, then each with a qualifier."""
    if not 2 <= count <= len(OPTION_IDS) * len(VARIANTS):
        raise ValueError(f"2 to {len(OPTION_IDS) * len(VARIANTS)} options, not {count}")
    found = {}
    for index in range(count):
        group, item = divmod(index, len(OPTION_IDS))
        name = OPTION_IDS[item] + (f"_{group}" if group else "")
        found[name] = OPTION_TEXTS[item] + (f" {VARIANTS[group]}" if group else "")
    return found


def options_body(size: str, state_index: int, count: int) -> dict[str, Any]:
    """One state and one choice among `count` options."""
    return {"model": MODEL, "state": state(size, state_index),
            "questions": {"next_step": {"type": "choice", "instructions": "What should support do next?",
                                        "criteria": option_names(count)}}}


def semif_body(size: str, state_index: int, count: int) -> dict[str, Any]:
    """The same kind of state and options through the SemIf door: one decision, scored with pmi."""
    return {"decision": {"id": f"bench-{state_index}", "state": state(size, state_index),
                         "question": "What should support do next?", "options": option_list(count)},
            "scoring": "pmi"}


def triage_body(size: str, state_index: int) -> dict[str, Any]:
    """The throughput workload's request: a fresh ticket and three questions of the three types."""
    return questions_body(size, state_index, THROUGHPUT_QUESTIONS)


def body_text(body: dict[str, Any]) -> str:
    """The request's own words (state and questions), whose tokens the floor decodes."""
    if "decision" in body:
        decision = body["decision"]
        return "\n".join([decision["state"], decision["question"], *(o["description"] for o in decision["options"])])
    parts = [str(body["state"])]
    for question in body["questions"].values():
        parts.append(str(question.get("instructions") or ""))
        criteria = question.get("criteria")
        if isinstance(criteria, dict):
            parts += [f"{name}: {text or name}" for name, text in criteria.items()]
        elif isinstance(criteria, list):
            parts += [str(level) for level in criteria]
    return "\n".join(parts)
