"""A labelled System One set nobody here wrote: sys1bench's generators with a seed of ours, as the evaluator reads it.

    .venv/bin/uv run --no-project --python 3.11 --with sys1bench==0.3.2 python tests/data/build_sys1bench.py
    .venv/bin/uv run --no-project --python 3.11 --with sys1bench==0.3.2 python tests/data/build_sys1bench.py --check

(the first rewrites the file; the second regenerates and compares, exit 1 if anything differs.)

sys1bench (PyPI, 0.3.2) generates labelled System One items from a seed: pure functions of (generator version,
seed, knobs), no network, no model (`sys1bench generate NAME OUT --n N --seed S` writes the same items as a
manifest). Its labels follow a policy stated in the item (a priority rule, a paging policy, numbered clauses), so
the gold is exact by construction. Four generators, four domains, 60 items each: 240 items, 1,020 questions. Each
question goes out as sys1bench's own TypeSafe adapter sends it (`to_vendor_question`: choice options with their
descriptions, score levels as an array lowest first, noul with its instructions alone), so the evaluator asks
exactly what `sys1bench run` would. Needs only sys1bench and the standard library (not this project's venv).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
OUT = HERE / "systemone_sys1bench.jsonl"
SYS1BENCH_VERSION = "0.3.2"
GENERATORS = ("support_tickets", "phishing_email", "log_triage", "policy_compliance")
ITEMS_PER_GENERATOR = 60
SEED = 2026
# The committed file's digest: the tests check it without sys1bench; --check regenerates and compares.
SHA256 = "6818c47b26c4e3a10437e374b24cf677a286b2b12859800e1cd4c5b1ecd2e2f5"


def gold(question: Any) -> Any:
    """The manifest's ground truth in the evaluator's terms: an option name, true/false, a level's index."""
    if question.type == "score":
        return [level.level for level in question.criteria].index(question.ground_truth)
    return question.ground_truth


def case(item: Any, to_vendor_question: Any) -> dict[str, Any]:
    return {"id": item.task_id, "state": item.state,
            "questions": {key: to_vendor_question(q) for key, q in item.questions.items()},
            "gold": {key: gold(q) for key, q in item.questions.items()},
            "kind": item.domain,
            "note": f"sys1bench {SYS1BENCH_VERSION} {item.label_provenance.generator} seed {SEED}"}


def build() -> str:
    import sys1bench
    from sys1bench.adapters.jev_typesafe import to_vendor_question
    from sys1bench.generators import get_generator

    if sys1bench.__version__ != SYS1BENCH_VERSION:
        raise SystemExit(f"expected sys1bench {SYS1BENCH_VERSION}, found {sys1bench.__version__}")
    lines = []
    for name in GENERATORS:
        for item in get_generator(name, n=ITEMS_PER_GENERATOR, seed=SEED).generate():
            lines.append(json.dumps(case(item, to_vendor_question), ensure_ascii=False) + "\n")
    return "".join(lines)


def main(argv: list[str]) -> int:
    text = build()
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    if "--check" in argv:
        same = OUT.exists() and OUT.read_text(encoding="utf-8") == text
        print(f"{OUT.name}: {'matches' if same else 'DIFFERS from'} sys1bench {SYS1BENCH_VERSION} (sha256 {digest})")
        return 0 if same and digest == SHA256 else 1
    OUT.write_text(text, encoding="utf-8")
    print(f"{text.count(chr(10))} items -> {OUT.name} (sha256 {digest}; record it in SHA256 above)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
