"""How one request's questions spread over the decision workers: in worker queues, each run on one worker in turn.

A llama_decode's thread count is fixed when the call starts, so two questions run side by side on one core each
finish together only if they cost about the same: a request asking a four-option choice and a yes/no question used
to run the choice's one call on one core while the yes/no question's ended early and left its core idle (2.7x the
floor of the extra question's tokens). A worker queue runs its questions one after another on one worker, whose
context keeps the state between them; a request gets a second worker queue only where splitting its questions is
estimated to finish sooner than one queue on every core. Only the speed depends on the queues: no number depends on
the worker, its thread count or what ran before (tests/adapter/test_decisions.py, test_workers.py).

A request about several states (a batch's lines) gets one worker queue per state instead: the workers take them as they
come free, so lines of very different sizes still share the workers evenly, and each state is evaluated once, in
its worker queue.
"""

from __future__ import annotations

from collections.abc import Sequence

from .question import Question, canonical_state

# Two workers on one core each serve about 1.07x the decisions/s of one worker on both cores (2 cores, the
# embedded model: README, "Benchmarks"), so k queues on a k-th of the cores each take k / 1.07 as long per question.
PARALLEL_GAIN = 1.07


def question_cost(question: Question) -> int:
    """A question's own work beyond its state, in characters (its tokens are counted on the worker, later): the
    criterion and every answer's text, which the answer methods read token by token and letters lists."""
    return len(canonical_state(question.criterion)) + sum(len(answer.text) for answer in question.answers)


def plan_worker_queues(costs: Sequence[int], order: Sequence[int], workers: int) -> list[list[int]]:
    """Indexes of `order` in at most `workers` worker queues, each in `order`: the most expensive first, each to
    the queue with the least so far, with as many queues as finish soonest by the estimate (one queue: the sum of
    the costs)."""
    best, best_time = [list(order)], float(sum(costs[i] for i in order))
    by_cost = sorted(order, key=lambda i: -costs[i])  # a stable sort: equal costs keep their order
    for count in range(2, min(workers, len(order)) + 1):
        queues: list[list[int]] = [[] for _ in range(count)]
        loads = [0] * count
        for index in by_cost:
            lightest = min(range(count), key=loads.__getitem__)
            queues[lightest].append(index)
            loads[lightest] += costs[index]
        if (finish := max(loads) * count / PARALLEL_GAIN) < best_time:
            best, best_time = queues, finish
    rank = {index: position for position, index in enumerate(order)}
    return [sorted(queue, key=rank.__getitem__) for queue in best]


def reuse_groups(questions: Sequence[Question]) -> list[list[int]]:
    """Indexes grouped by method (each has its own head), then state, each group where it first appears, and in a
    group by criterion: consecutive questions then share the longest prefix. Only the speed depends on this."""
    ranks: dict[tuple[str, ...], int] = {}
    keys = []
    for index, question in enumerate(questions):
        method, state = question.method.value, canonical_state(question.state)
        groups = ((method,), (method, state), (method, state, canonical_state(question.criterion)))
        keys.append((*(ranks.setdefault(group, len(ranks)) for group in groups), index))
    found: dict[tuple[int, ...], list[int]] = {}
    for key in sorted(keys):
        found.setdefault(key[:2], []).append(key[-1])
    return list(found.values())


def reuse_order(questions: Sequence[Question]) -> list[int]:
    return [index for group in reuse_groups(questions) for index in group]


def worker_queues(questions: Sequence[Question], workers: int) -> list[list[int]]:
    """The worker queues of one request: one per (method, state) group when there are several, else
    `plan_worker_queues`."""
    groups = reuse_groups(questions)
    if len(groups) != 1:
        return groups
    return plan_worker_queues([question_cost(question) for question in questions], groups[0], workers)
