"""Synthetic but realistic decision requests, generated deterministically from an index.

Every benchmark phase (floor, reference, adapter, chat) builds its requests
from the same (size, options, index) triples, so they all evaluate exactly the
same tokens. A new index gives a state that differs from the first word on, so
neither the adapter's chunk cache nor llama-server's token-prefix cache can
reuse more than the constant head.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

# Approximate state sizes in tokens (about 4.3 characters per token for this English prose).
STATE_CHARS = {"short": 100, "medium": 1200, "long": 6100}
OPENERS = ("Ticket", "Order", "Claim", "Shipment", "Account", "Booking", "Invoice", "Request", "Contract", "Case")
NAMES = ("Alvarez", "Brooks", "Chen", "Dubois", "Eriksen", "Fontaine", "Gupta", "Haddad", "Ivanova", "Jensen",
         "Kowalski", "Lindqvist", "Moreau", "Nakamura", "Okafor", "Petrov")
EVENTS = (
    "the customer {name} wrote that the parcel arrived {days} days late and the box was dented",
    "a reminder was sent on day {days} and nobody answered it",
    "the warehouse in {city} reported {count} units missing from the last pallet",
    "support agent {name} promised a call back within {days} hours but the call never happened",
    "the carrier scanned the parcel in {city} and the tracking page has not changed since",
    "the invoice of {amount} euros is still open and the payment terms allow {days} days",
    "{name} asked for a refund of {amount} euros and attached {count} photos of the damage",
    "the account was flagged by the fraud check after {count} failed card payments",
    "a replacement was shipped from {city} and signed for by {name} on day {days}",
    "the contract renews in {days} days unless {name} cancels it in writing",
    "the customer has been a subscriber for {count} years and never filed a complaint before",
    "the product page promised delivery in {days} days but the order took {count} weeks",
)
CITIES = ("Lyon", "Porto", "Gdansk", "Leipzig", "Bilbao", "Turin", "Ghent", "Tampere", "Brno", "Cork")
QUESTIONS = (
    "What should support do next?",
    "Which team should own this case?",
    "How urgent is this case for the operations team?",
    "Is the customer likely to cancel the account?",
    "What is the most likely cause of the problem?",
    "Which reply should the agent send first?",
    "Should this case be escalated to a manager?",
    "What compensation is appropriate here?",
    "Which risk is the largest for the company?",
    "What should the warehouse check first?",
    "Who is at fault for the delay?",
    "What should finance do with the open invoice?",
)
OPTION_TEXTS = (
    "Refund the order in full", "Ship a replacement at no cost", "Offer a voucher for the next order",
    "Call the customer back today", "Hand the case to a human supervisor", "Open a claim with the carrier",
    "Ask the customer for more photos", "Close the case as resolved", "Send a written apology by email",
    "Escalate to the fraud team", "Wait three more days for the parcel", "Cancel the contract on request",
    "Move the account to collections", "Check the stock in the warehouse", "Extend the payment terms",
    "Do nothing and monitor the account",
)
OPTION_IDS = ("refund", "replace", "voucher", "call", "supervisor", "claim", "photos", "close", "apology",
              "fraud", "wait", "cancel", "collections", "stock", "extend", "monitor")


@dataclass(frozen=True)
class Spec:
    """One request: which state (size, index), which question, how many options, debias mode, scoring method."""

    size: str
    state_index: int
    question_index: int
    options: int
    debias: str = "none"
    scoring: str = "letters"

    def body(self) -> dict[str, Any]:
        body = decision_body(state_text(self.size, self.state_index), question_text(self.question_index),
                             self.options, self.debias)
        return {**body, "scoring": self.scoring}  # explicit: the endpoint's default method is not the floor's


def state_text(size: str, index: int) -> str:
    """A state of about the size's length; the same (size, index) always gives the same text."""
    rng = random.Random(f"{size}-{index}")
    sentences = [f"{OPENERS[index % len(OPENERS)]} {1000 + index}: "
                 f"{NAMES[rng.randrange(len(NAMES))]} contacted us on channel {rng.randrange(2, 9)}."]
    while sum(len(s) + 1 for s in sentences) < STATE_CHARS[size]:
        event = rng.choice(EVENTS).format(name=rng.choice(NAMES), city=rng.choice(CITIES),
                                          days=rng.randrange(2, 30), count=rng.randrange(2, 12),
                                          amount=rng.randrange(20, 2000))
        sentences.append(event[0].upper() + event[1:] + ".")
    return " ".join(sentences)


def question_text(index: int) -> str:
    """Questions cycle through the pool with a suffix, so every index is a distinct question."""
    return f"{QUESTIONS[index % len(QUESTIONS)]} (check {index})"


def option_list(count: int) -> list[dict[str, str]]:
    return [{"id": OPTION_IDS[i], "description": OPTION_TEXTS[i]} for i in range(count)]


def decision_body(state: str, question: str, options: int, debias: str = "none") -> dict[str, Any]:
    return {"decision": {"id": "bench", "state": state, "question": question, "options": option_list(options)},
            "debias": debias}
