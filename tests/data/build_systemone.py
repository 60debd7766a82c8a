"""The project's labelled System One cases: written by hand here, written out as JSON Lines by `main()`.

    .venv/bin/python tests/data/build_systemone.py      # rewrites systemone.jsonl

Every case below was written by a person: the evidence (`state`: a ticket, a review, an expense line, an alert),
and which of the kind's questions it is asked, with the answer a careful reader gives. The questions are written
once per kind and asked of several states, so the same yes/no question meets states where the answer is yes and
states where it is no (a method that says yes to everything shows it), and the same scale meets states across
its levels. The three System One types, in the forms clients send: noul with its criteria absent, null, two-sided,
one-sided (true or false only) and without instructions; choice with 2 to 12 options, null descriptions, Unicode
option names, and instructions and descriptions given as objects and arrays; score with 2 to 10 levels, some
given as objects. 28 choice cases are the first four of each kind of decisions.jsonl (not the yes/no policy
checks), asked as System One choices.

Choice options are written with the gold option first (a writing convention only); the order the endpoint sees
is assigned as in build_decisions.py (its `gold_positions` and `_arrange`): per option count, the choice
questions sorted by kind and question, then gold name, then file order, are dealt the gold positions 0, 1, ...,
N-1, 0, ... in turn, and the other options fill the remaining positions in an order seeded by the case and
question id. `tests/tools/evaluate` checks that the committed file is exactly what this script writes, and that
every case is one the evaluator and the endpoint accept. See README.md next to this file.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent
OUT = HERE / "systemone.jsonl"
DERIVED_PER_KIND = 4  # from decisions.jsonl: the first cases of each kind but the yes/no policy checks
DERIVED_SKIPPED = ("policy",)
ABSENT = object()  # a noul whose criteria key is left out (not null)


def noul(instructions: Any = ABSENT, criteria: Any = ABSENT) -> dict[str, Any]:
    question: dict[str, Any] = {"type": "noul"}
    if instructions is not ABSENT:
        question["instructions"] = instructions
    if criteria is not ABSENT:
        question["criteria"] = criteria
    return question


def choice(instructions: Any, options: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": "choice", "instructions": instructions, "criteria": dict(options)}


def score(instructions: Any, levels: list[Any]) -> dict[str, Any]:
    return {"type": "score", "instructions": instructions, "criteria": levels}


@dataclass(frozen=True)
class Written:
    """One state and the answers to the kind's questions it is asked (choice: an option name; noul: True or
    False; score: the level's index, 0 = the first level listed)."""

    state: Any
    gold: Mapping[str, Any]
    offer: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # choice id -> names offered (else all)
    note: str | None = None


@dataclass(frozen=True)
class Kind:
    name: str
    questions: Mapping[str, dict[str, Any]]  # id -> System One question (choice: every option, as written)
    cases: tuple[Written, ...]


W = Written

SUPPORT = Kind("support", {
    "refund": noul("Is the customer asking for their money back?"),  # criteria absent
    "deadline": score("How soon does the customer need this handled, going by what the message says?",
                      ["No deadline is mentioned", "A deadline more than 24 hours away",
                       "A deadline within the next 24 hours, but more than an hour away",
                       "A deadline within the next hour"]),
}, (
    W("I was charged twice for order #4471. Please refund the second charge; there's no rush.",
      {"refund": True, "deadline": 0}),
    W("The blender I bought stopped working after two days. I want my money back before my return window closes "
      "on Friday, five days from now.", {"refund": True, "deadline": 1}),
    W("My flight leaves in 3 hours and the e-ticket you emailed won't open. Please resend it right away.",
      {"refund": False, "deadline": 2}),
    W("Our shop opens in 40 minutes and the card terminal you rented us shows 'error 12'. We need it working "
      "before we open.", {"refund": False, "deadline": 3}),
    W("Cancel my subscription and return this month's fee to my card, I never used it. I need the money back "
      "within the next 12 hours to pay my rent.", {"refund": True, "deadline": 2}),
    W("How do I change the email address on my account?", {"refund": False, "deadline": 0}),
    W("The concert tickets I bought are for the wrong date. The show starts in 30 minutes; refund them now so I "
      "can buy the right ones at the door.", {"refund": True, "deadline": 3}),
    W("Could you send me copies of last year's invoices? Our accountant needs them by the end of next week.",
      {"refund": False, "deadline": 1}),
))

EXPENSE_POLICY = ("Can this expense be approved? Travel policy: meals at most 60 EUR per person; hotels at most 150 "
                  "EUR per night; other categories have no limit; every expense needs a receipt.")
EXPENSES = Kind("expenses", {
    "approvable": noul(EXPENSE_POLICY, {"true": "It is within its category's limit and a receipt is attached",
                                        "false": "It is over its category's limit, or there is no receipt"}),
    "category": choice({"task": "Classify the expense", "read": "the description field"},
                       {"meal": {"covers": ["restaurants", "catering", "food while travelling"]},
                        "lodging": {"covers": ["hotels", "short-term rentals"]},
                        "transport": {"covers": ["trains", "flights", "taxis", "fuel"]},
                        "equipment": {"covers": ["laptops", "phones", "chargers", "accessories"]}}),
}, (
    W({"employee": "R. Osei", "description": "Dinner with a client, 2 people", "amount_eur": 96, "people": 2,
       "receipt": True}, {"approvable": True, "category": "meal"}, note="48 EUR per person"),
    W({"employee": "L. Marsh", "description": "Hotel Bellevue, 1 night", "amount_eur": 210, "nights": 1,
       "receipt": True}, {"approvable": False, "category": "lodging"}),
    W({"employee": "K. Ibarra", "description": "Taxi from the airport to the office", "amount_eur": 38,
       "receipt": False}, {"approvable": False, "category": "transport"}),
    W({"employee": "P. Nowak", "description": "Train ticket Paris-Lyon, second class", "amount_eur": 74,
       "receipt": True}, {"approvable": True, "category": "transport"}),
    W({"employee": "S. Haddad", "description": "Hotel Astoria, 3 nights", "amount_eur": 420, "nights": 3,
       "receipt": True}, {"approvable": True, "category": "lodging"}, note="140 EUR per night"),
    W({"employee": "M. Rossi", "description": "Team lunch, 5 people", "amount_eur": 340, "people": 5,
       "receipt": True}, {"approvable": False, "category": "meal"}, note="68 EUR per person"),
    W({"employee": "A. Chen", "description": "USB-C charger for the work laptop", "amount_eur": 29,
       "receipt": True}, {"approvable": True, "category": "equipment"}),
    W({"employee": "D. Novak", "description": "Replacement work phone after the old one broke", "amount_eur": 480,
       "receipt": False}, {"approvable": False, "category": "equipment"}),
))

SHIPPING = Kind("shipping", {
    "postable": noul("Can this parcel go by standard post?",
                     {"false": "It weighs more than 30 kg, or it contains lithium batteries, aerosols, or more than "
                               "1 litre of liquid"}),  # one-sided: only what makes the answer no
    "weight": score("Which weight band is the parcel in?",
                    ["up to 0.5 kg", "over 0.5 kg, up to 2 kg", "over 2 kg, up to 5 kg", "over 5 kg, up to 10 kg",
                     "over 10 kg, up to 30 kg", "over 30 kg"]),
}, (
    W({"contents": "two paperback books", "weight_kg": 0.8}, {"postable": True, "weight": 1}),
    W({"contents": "a laptop with its lithium battery", "weight_kg": 2.4}, {"postable": False, "weight": 2}),
    W({"contents": "a cast-iron garden bench, taken apart", "weight_kg": 34}, {"postable": False, "weight": 5}),
    W({"contents": "a silk scarf", "weight_kg": 0.2}, {"postable": True, "weight": 0}),
    W({"contents": "six 1.5-litre bottles of olive oil", "weight_kg": 9.6}, {"postable": False, "weight": 3}),
    W({"contents": "a box of ceramic floor tiles", "weight_kg": 22}, {"postable": True, "weight": 4}),
    W({"contents": "three cans of spray paint (aerosols)", "weight_kg": 1.4}, {"postable": False, "weight": 1}),
    W({"contents": "children's wooden toys", "weight_kg": 4.5}, {"postable": True, "weight": 2}),
))

LAB = Kind("lab", {
    "admit": noul("May this person enter the chemistry lab on 2026-03-10?",
                  {"true": "They have completed the lab safety training, and their badge is valid on that date"}),
}, (
    W({"name": "I. Petrova", "safety_training": "completed 2025-11-02", "badge_valid_until": "2026-06-30"},
      {"admit": True}),
    W({"name": "T. Okafor", "safety_training": "not completed", "badge_valid_until": "2026-12-31"},
      {"admit": False}),
    W({"name": "J. Lindqvist", "safety_training": "completed 2025-09-15", "badge_valid_until": "2026-02-28"},
      {"admit": False}),
    W({"name": "R. Tanaka", "safety_training": "completed 2024-01-15", "badge_valid_until": "2027-01-01"},
      {"admit": True}),
    W({"name": "S. Mehta", "safety_training": "completed 2026-02-20", "badge_valid_until": "2026-03-31"},
      {"admit": True}),
    W({"name": "A. Alvarez", "safety_training": "scheduled for 2026-03-12", "badge_valid_until": "2026-09-30"},
      {"admit": False}),
))

REVIEWS = Kind("reviews", {
    # no instructions: the criteria alone say what yes and no mean
    "recommends": noul(criteria={"true": "The reviewer recommends buying the product",
                                 "false": "The reviewer advises against buying the product"}),
    "stars": score("How many stars does the reviewer give?",
                   ["1 star", "2 stars", "3 stars", "4 stars", "5 stars"]),
}, (
    W("Five stars. The kettle boils fast and it is quiet. Buy it.", {"recommends": True, "stars": 4}),
    W("One star. It broke on the second day and support ignored me. Don't waste your money.",
      {"recommends": False, "stars": 0}),
    W("Three stars: the headphones sound fine but the cushions are hard. I wouldn't buy them again.",
      {"recommends": False, "stars": 2}),
    W("Four stars. Comfortable shoes, a little narrow, but I'd recommend them to anyone.",
      {"recommends": True, "stars": 3}),
    W("Two stars. The lamp works, but the light is harsh and the switch feels cheap. Look elsewhere.",
      {"recommends": False, "stars": 1}),
    W("I give this backpack four stars: roomy and sturdy, though the zips are stiff. Recommended.",
      {"recommends": True, "stars": 3}),
    W("Five out of five stars. The best coffee grinder I've owned; get one.", {"recommends": True, "stars": 4}),
    W("A solid three stars: the blender is loud, but it does the job, and for the price I'd still recommend it.",
      {"recommends": True, "stars": 2}),
    W("Two stars. Pretty mug, but it leaks from the handle. Skip it.", {"recommends": False, "stars": 1}),
    W("One star. The charger got hot and smelled of burning plastic. Avoid.", {"recommends": False, "stars": 0}),
))

ORDERS = Kind("orders", {
    "approval": noul({"rule": "An order needs a manager's approval when its total is over 500 USD or when it "
                              "contains a software licence",
                      "question": "Does this order need a manager's approval?"}, None),  # criteria null
    "units": score("How many units does the order contain in total, counting every line's quantity?",
                   ["1 unit", "2 units", "3 units", "4 units", "5 units", "6 units", "7 units", "8 units",
                    "9 or more units"]),
}, (
    W({"lines": [{"item": "desk chair", "qty": 2, "unit_usd": 180}], "total_usd": 360},
      {"approval": False, "units": 1}),
    W({"lines": [{"item": "laptop", "qty": 1, "unit_usd": 1400}], "total_usd": 1400},
      {"approval": True, "units": 0}),
    W({"lines": [{"item": "box of pens", "qty": 5, "unit_usd": 4}, {"item": "notebook", "qty": 4, "unit_usd": 3}],
       "total_usd": 32}, {"approval": False, "units": 8}),
    W({"lines": [{"item": "design software licence, 1 year", "qty": 1, "unit_usd": 240}], "total_usd": 240},
      {"approval": True, "units": 0}),
    W({"lines": [{"item": "monitor", "qty": 3, "unit_usd": 150}, {"item": "HDMI cable", "qty": 3, "unit_usd": 9}],
       "total_usd": 477}, {"approval": False, "units": 5}),
    W({"lines": [{"item": "whiteboard", "qty": 1, "unit_usd": 120}, {"item": "pack of markers", "qty": 2,
                                                                      "unit_usd": 6},
                 {"item": "project-planning software licence", "qty": 1, "unit_usd": 96}], "total_usd": 228},
      {"approval": True, "units": 3}),
    W({"lines": [{"item": "standing desk", "qty": 2, "unit_usd": 310}], "total_usd": 620},
      {"approval": True, "units": 1}),
    W({"lines": [{"item": "coffee beans, 1 kg bag", "qty": 7, "unit_usd": 18}], "total_usd": 126},
      {"approval": False, "units": 6}),
))

ALERTS = Kind("alerts", {
    "page": noul(["Read the alert.", "Decide whether to wake the on-call engineer."],
                 {"true": "The environment is production, and the service is down for all its users or data is "
                          "being lost"}),
    "severity": score("How severe is the incident?",
                      [{"level": "minor", "meaning": "no user is affected"},
                       {"level": "major", "meaning": "some users are affected"},
                       {"level": "critical", "meaning": "all users are affected, or data is lost"}]),
    "component": choice("Which component is at fault?",
                        {"database": ["PostgreSQL", "replication", "queries"],
                         "network": ["DNS", "load balancers", "TLS certificates"],
                         "storage": ["disks", "volumes", "backups"],
                         "application": ["API servers", "web app", "background workers"],
                         "auth": ["logins", "tokens", "single sign-on"]}),
}, (
    W({"env": "production", "service": "public-api",
       "message": "The TLS certificate for api.example.com expired at 09:00; every HTTPS connection is refused",
       "users_affected": "all"}, {"page": True, "severity": 2, "component": "network"}),
    W({"env": "staging", "service": "orders-db", "message": "Replication lag on the read replica is 45 minutes",
       "users_affected": "none"}, {"page": False, "severity": 0, "component": "database"}),
    W({"env": "production", "service": "nightly-backup", "message": "The backup volume is 91% full",
       "users_affected": "none"}, {"page": False, "severity": 0, "component": "storage"}),
    W({"env": "production", "service": "orders-db",
       "message": "The primary PostgreSQL server crashed and refuses connections; writes since 10:40 are lost",
       "users_affected": "all"}, {"page": True, "severity": 2, "component": "database"}),
    W({"env": "production", "service": "login",
       "message": "Single sign-on fails for the users of one customer, Acme Corp; everyone else can sign in",
       "users_affected": "some"}, {"page": False, "severity": 1, "component": "auth"}),
    W({"env": "canary", "service": "web-app", "message": "The web app returns HTTP 500 on every page",
       "users_affected": "some (canary testers only)"}, {"page": False, "severity": 1, "component": "application"}),
    W({"env": "production", "service": "order-workers",
       "message": "Every background worker crashed; no order is being processed", "users_affected": "all"},
      {"page": True, "severity": 2, "component": "application"}),
    W({"env": "production", "service": "uploads",
       "message": "The storage volume holding user uploads was deleted; uploads since Monday are gone",
       "users_affected": "some (40 users)"}, {"page": True, "severity": 2, "component": "storage"}),
))

BUILDS = Kind("builds", {
    "release": noul("May this build be released? Rule: release only when no test fails and test coverage is at "
                    "least 80%.", None),
    "failures": score("How many tests failed?",
                      ["no test failed", "1 test failed", "2 tests failed", "3 tests failed", "4 tests failed",
                       "5 tests failed", "6 tests failed", "7 tests failed", "8 tests failed",
                       "9 or more tests failed"]),
}, (
    W({"build": 1841, "tests_passed": 412, "tests_failed": 0, "coverage_percent": 84},
      {"release": True, "failures": 0}),
    W({"build": 1842, "tests_passed": 409, "tests_failed": 3, "coverage_percent": 84},
      {"release": False, "failures": 3}),
    W({"build": 1843, "tests_passed": 405, "tests_failed": 7, "coverage_percent": 83}, {"failures": 7}),
    W({"build": 1844, "tests_passed": 400, "tests_failed": 12, "coverage_percent": 85},
      {"release": False, "failures": 9}),
    W({"build": 1845, "tests_passed": 411, "tests_failed": 1, "coverage_percent": 84}, {"failures": 1}),
    W({"build": 1846, "tests_passed": 407, "tests_failed": 5, "coverage_percent": 86}, {"failures": 5}),
    W({"build": 1847, "tests_passed": 430, "tests_failed": 0, "coverage_percent": 91}, {"release": True}),
    W({"build": 1848, "tests_passed": 398, "tests_failed": 0, "coverage_percent": 72}, {"release": False}),
    W({"build": 1849, "tests_passed": 415, "tests_failed": 0, "coverage_percent": 80}, {"release": True}),
    W({"build": 1850, "tests_passed": 421, "tests_failed": 2, "coverage_percent": 95},
      {"release": False, "failures": 2}),
    W({"build": 1851, "tests_passed": 425, "tests_failed": 0, "coverage_percent": 88}, {"release": True}),
))

DELIVERY = Kind("delivery", {
    "lateness": score("How late was the delivery, counting calendar days from the promised date?",
                      ["on time or early", "1 day late", "2 days late", "3 to 4 days late", "5 to 7 days late",
                       "8 to 14 days late", "more than 14 days late"]),
    "voucher": score("What compensation does the customer get? Policy: a delivery more than 3 days late earns "
                     "a 10 EUR voucher.", ["no voucher", "a 10 EUR voucher"]),
}, (
    W({"order": "D-101", "promised": "2026-03-03", "delivered": "2026-03-03"}, {"lateness": 0, "voucher": 0}),
    W({"order": "D-102", "promised": "2026-03-03", "delivered": "2026-03-05"}, {"lateness": 2, "voucher": 0}),
    W({"order": "D-103", "promised": "2026-04-10", "delivered": "2026-04-16"}, {"lateness": 4, "voucher": 1}),
    W({"order": "D-104", "promised": "2026-05-01", "delivered": "2026-05-26"}, {"lateness": 6, "voucher": 1}),
    W({"order": "D-105", "promised": "2026-06-12", "delivered": "2026-06-13"}, {"lateness": 1, "voucher": 0}),
    W({"order": "D-106", "promised": "2026-07-20", "delivered": "2026-07-30"}, {"lateness": 5, "voucher": 1}),
    W({"order": "D-107", "promised": "2026-02-26", "delivered": "2026-03-02"}, {"lateness": 3, "voucher": 1},
      note="4 days: February 2026 has 28 days"),
))

TEAM_SIZE = Kind("team_size", {
    "size": score("How many people are in the customer's team or organisation?",
                  ["1 person", "2 to 5 people", "6 to 10 people", "11 to 25 people", "26 to 50 people",
                   "51 to 100 people", "101 to 500 people", "more than 500 people"]),
}, (
    W("We're a small team of 4 designers looking for a shared workspace.", {"size": 1}),
    W("Our company has 250 employees and all of them would need access.", {"size": 6}),
    W("I'm a freelancer and work alone.", {"size": 0}),
    W("We'd need seats for our 18 engineers.", {"size": 3}),
    W("The whole organisation, about 1,200 staff, would use it.", {"size": 7}),
    W("Our lab has 37 researchers.", {"size": 4}),
    W("We're a team of 75 across two offices.", {"size": 5}),
    W("There are eight of us in the support team.", {"size": 2}),
))

NATIVE_LANGUAGE = Kind("native_language", {
    "language": choice("In which language is the message written?",
                       dict.fromkeys(["English", "Français", "Deutsch", "Español", "Italiano", "Português",
                                      "Nederlands", "Polski", "Svenska", "Türkçe", "Čeština", "Ελληνικά"])),
}, (
    W("Bonjour, je voudrais annuler ma commande, s'il vous plaît.", {"language": "Français"}),
    W("Guten Tag, meine Bestellung ist noch nicht angekommen.", {"language": "Deutsch"},
      {"language": ("Deutsch", "Nederlands", "Svenska")}),
    W("Hola, ¿pueden enviarme la factura de marzo?", {"language": "Español"},
      {"language": ("Español", "Português", "Italiano", "Français")}),
    W("Buongiorno, il pacco è arrivato danneggiato.", {"language": "Italiano"}),
    W("Olá, esqueci-me da minha palavra-passe.", {"language": "Português"},
      {"language": ("Português", "Español")}),
    W("Goedemorgen, mijn factuur klopt niet.", {"language": "Nederlands"},
      {"language": ("Nederlands", "Deutsch", "English", "Svenska", "Polski")}),
    W("Dzień dobry, chciałbym zwrócić te buty.", {"language": "Polski"}),
    W("Hej, jag har inte fått något kvitto.", {"language": "Svenska"},
      {"language": ("Svenska", "Nederlands", "Deutsch", "English", "Polski", "Čeština")}),
    W("Merhaba, siparişim nerede?", {"language": "Türkçe"}),
    W("Dobrý den, objednávka mi ještě nepřišla.", {"language": "Čeština"},
      {"language": ("Čeština", "Polski", "Deutsch", "Svenska", "English", "Español", "Türkçe", "Italiano")}),
    W("Καλημέρα, θα ήθελα να ακυρώσω την κράτησή μου.", {"language": "Ελληνικά"},  # noqa: RUF001 (Greek)
      {"language": ("Ελληνικά", "Türkçe", "Italiano", "Español", "Português", "English", "Français")}),
    W("Hi, my parcel hasn't arrived yet.", {"language": "English"}, {"language": ("English", "Nederlands")}),
))

MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]
EVENTS = Kind("events", {
    "city": choice("In which city does the event take place?",
                   dict.fromkeys(["Zürich", "São Paulo", "Kraków", "Reykjavík", "Malmö", "Lisboa"])),
    "month": choice("In which month does the event take place?", dict.fromkeys(MONTHS)),
    "open": noul("Can anyone attend this event?",
                 {"false": "Attendance is by invitation only, or registration is closed or full"}),
}, (
    W("The annual meetup is on 14 March at the Kongresshaus in Zürich. Entry is free and open to everyone.",
      {"city": "Zürich", "month": "March", "open": True}),
    W("Join us in São Paulo on 2 September for the product launch. Invitation only.",
      {"city": "São Paulo", "month": "September", "open": False}, {"city": ("São Paulo", "Lisboa")}),
    W("The workshop runs 20-21 November in Kraków's old town. Registration closed last week and the waiting list "
      "is full.", {"city": "Kraków", "month": "November", "open": False},
      {"city": ("Kraków", "Malmö", "Zürich")}),
    W("Our winter get-together: Reykjavík, 8 January. Anyone can walk in.",
      {"city": "Reykjavík", "month": "January", "open": True}, {"city": ("Reykjavík", "Malmö", "Lisboa", "Zürich")}),
    W("The partner summit moves to Malmö on 30 June. All are welcome; no registration is needed.",
      {"city": "Malmö", "month": "June", "open": True}),
    W("Save the date: 5 April in Lisboa, for invited partners only.",
      {"city": "Lisboa", "month": "April", "open": False}, {"city": ("Lisboa", "São Paulo", "Kraków", "Malmö",
                                                                      "Reykjavík")}),
))

KINDS = (SUPPORT, EXPENSES, SHIPPING, LAB, REVIEWS, ORDERS, ALERTS, BUILDS, DELIVERY, TEAM_SIZE, NATIVE_LANGUAGE,
         EVENTS)


def decisions_builder() -> ModuleType:
    """build_decisions.py, for its cases and its gold-position rule (a script next to this one, not a package)."""
    spec = importlib.util.spec_from_file_location("build_decisions", HERE / "build_decisions.py")
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {HERE / 'build_decisions.py'}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def derived(decisions: ModuleType) -> Iterator[tuple[str, Kind]]:
    """The first decisions of each kind (not the yes/no policy checks) as one-question System One choices, the
    gold option written first; the case keeps its decision id."""
    taken: dict[str, int] = {}
    for line in decisions.build():
        kind = line["kind"]
        if kind in DERIVED_SKIPPED or taken.get(kind, 0) >= DERIVED_PER_KIND:
            continue
        taken[kind] = taken.get(kind, 0) + 1
        decision = line["decision"]
        options = {o["id"]: o["description"] for o in decision["options"]}
        ordered = {line["gold"]: options[line["gold"]]} | options
        yield decision["id"], Kind(kind, {kind: choice(decision["question"], ordered)},
                                   (W(decision["state"], {kind: line["gold"]}),))


@dataclass(frozen=True)
class Asked:
    """One question of one case, before the options are put in the order the endpoint sees."""

    case_id: str
    kind: str
    question_id: str
    question: dict[str, Any]
    gold: Any
    written: tuple[str, ...] = ()  # choice: the names offered, gold first


def asked(decisions: ModuleType) -> Iterator[tuple[str, Kind, Written, list[Asked]]]:
    """Every case in file order: its id, kind, what was written, and its questions (in the kind's order)."""
    own = [(f"{kind.name}-{number:03d}", kind, case) for kind in KINDS
           for number, case in enumerate(kind.cases, start=1)]
    every = own + [(case_id, kind, kind.cases[0]) for case_id, kind in derived(decisions)]
    for case_id, kind, case in every:
        if not case.gold or not set(case.gold) <= set(kind.questions) or not set(case.offer) <= set(case.gold):
            raise ValueError(f"{case_id}: answers {sorted(case.gold)} or offers {sorted(case.offer)} are not "
                             f"among the kind's questions {sorted(kind.questions)}")
        questions = []
        for qid in (q for q in kind.questions if q in case.gold):
            question, gold = kind.questions[qid], case.gold[qid]
            written: tuple[str, ...] = ()
            if question["type"] == "choice":
                names = case.offer.get(qid, tuple(question["criteria"]))
                if gold not in names or len(set(names)) != len(names) or not set(names) <= set(question["criteria"]):
                    raise ValueError(f"{case_id}: {qid} offers {names}, which must be distinct options with the gold")
                written = (gold, *(name for name in names if name != gold))
            questions.append(Asked(case_id, kind.name, qid, question, gold, written))
        yield case_id, kind, case, questions


def build() -> Iterator[dict[str, Any]]:
    """Every case, in file order, as the evaluator reads it."""
    decisions = decisions_builder()
    cases = list(asked(decisions))
    choices = [q for _, _, _, questions in cases for q in questions if q.written]
    positions = dict(zip(((q.case_id, q.question_id) for q in choices),
                         decisions.gold_positions([(len(q.written), f"{q.kind}/{q.question_id}", q.gold)
                                                   for q in choices]), strict=True))
    for case_id, kind, case, questions in cases:
        sent: dict[str, Any] = {}
        for q in questions:
            if q.written:
                order = decisions._arrange(f"{case_id}/{q.question_id}", list(q.written),
                                           positions[(case_id, q.question_id)])
                sent[q.question_id] = {**q.question, "criteria": {name: q.question["criteria"][name]
                                                                  for name in order}}
            else:
                sent[q.question_id] = q.question
        line: dict[str, Any] = {"id": case_id, "state": case.state, "questions": sent,
                                "gold": {q.question_id: q.gold for q in questions}, "kind": kind.name}
        if case.note:
            line["note"] = case.note
        yield line


def main() -> int:
    cases = list(build())
    OUT.write_text(decisions_builder().jsonl(cases), encoding="utf-8")  # the same JSON Lines writer
    print(f"{len(cases)} cases, {sum(len(case['gold']) for case in cases)} questions -> {OUT.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
