"""Write a sample JSON Lines file for `semif batch`: support tickets, several questions about each.

    python -m scripts.batch.sample sample.jsonl [--lines 1000] [--questions 4] [--seed 7]

The backlog a team would classify: each ticket (the state) is asked `--questions` questions, one line each,
the ticket's lines together, as an export of tickets joined with a list of questions comes out. The same
seed writes the same file, so a measurement can be repeated on the same bytes.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

from ..common.command import program_parser

CUSTOMERS = ("Ana", "Ben", "Chloe", "Dev", "Emre", "Fatima", "Goran", "Hana", "Ivo", "Jun")
ITEMS = ("laptop", "phone", "monitor", "headset", "router", "printer", "camera", "keyboard", "tablet", "speaker")
PROBLEMS = (
    "arrived with a cracked screen", "was never delivered although the tracking says it was",
    "stops working after ten minutes", "was charged twice on my card", "is not the colour I ordered",
    "came without the charger", "makes a loud buzzing noise", "was delivered to the wrong address",
)
TONES = ("Please help.", "This is the third time I write.", "I need it for work tomorrow.",
         "Honestly I am furious.", "No rush, just letting you know.", "Can you call me back?")
QUESTIONS = (
    ("action", "What should support do next?",
     {"refund": "Refund the order in full", "replace": "Ship a replacement",
      "escalate": "Hand the case to a human agent"}),
    ("urgency", "How urgent is this ticket?",
     {"low": "It can wait a few days", "normal": "Answer within a day", "high": "Answer within the hour"}),
    ("team", "Which team owns this ticket?",
     {"billing": "Payments and refunds", "shipping": "Deliveries and couriers", "technical": "Faulty devices"}),
    ("mood", "How does the customer feel?",
     {"calm": "Calm and patient", "annoyed": "Annoyed", "angry": "Angry"}),
    ("churn", "Is the customer likely to leave?",
     {"no": "No, a one-off problem", "maybe": "Possibly", "yes": "Yes, they say so or imply it"}),
    ("language", "Which tone should the answer take?",
     {"formal": "Formal", "friendly": "Friendly", "apologetic": "Apologetic"}),
)


def ticket(rng: random.Random, number: int) -> str:
    order = rng.randrange(10_000, 99_999)
    return (f"Ticket {number}, order {order}. {rng.choice(CUSTOMERS)} writes: my {rng.choice(ITEMS)} "
            f"{rng.choice(PROBLEMS)}. {rng.choice(TONES)}")


def sample_lines(lines: int, questions: int, seed: int) -> list[str]:
    """`lines` requests: ticket after ticket, each asked the first `questions` questions (the last may be cut)."""
    rng = random.Random(seed)
    out: list[str] = []
    number = 0
    while len(out) < lines:
        number += 1
        state = ticket(rng, number)
        for key, question, options in QUESTIONS[:questions]:
            if len(out) == lines:
                break
            decision = {"id": f"t{number:05d}-{key}", "state": state, "question": question,
                        "options": [{"id": option, "description": text} for option, text in options.items()]}
            out.append(json.dumps({"decision": decision}, separators=(",", ":")))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = program_parser(__doc__, f"{__package__}.sample")
    parser.add_argument("output", type=Path, metavar="OUTPUT", help="the JSON Lines file to write")
    parser.add_argument("--lines", type=int, default=1000, help="request lines (default %(default)s)")
    parser.add_argument("--questions", type=int, default=4, choices=range(1, len(QUESTIONS) + 1),
                        metavar=f"1-{len(QUESTIONS)}", help="questions per ticket (default %(default)s)")
    parser.add_argument("--seed", type=int, default=7, help="random seed (default %(default)s)")
    args = parser.parse_args(argv)
    if args.lines < 1:
        parser.error("--lines must be at least 1")
    lines = sample_lines(args.lines, args.questions, args.seed)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text("".join(line + "\n" for line in lines))
    print(f"batch sample: {len(lines)} lines, {args.questions} questions per ticket -> {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
