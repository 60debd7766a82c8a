"""A question's answer branches as a token trie: an opening several answers share is decoded once, for all of them.

Templated option sets share long openings ("Tickets routed to queue 1", "... queue 2", ...: 255 such answers are
2,186 tokens as separate branches and 268 as a trie on SmolLM2's vocabulary). A token may belong to several
sequences in one llama.cpp batch, so a shared opening's tokens carry every sharing branch's sequence id and are
computed once; each branch then goes on in its own sequence. The trie is a function of the branches alone (their
tokens, in the plan's fixed order), so where each token sits in its batch, and hence every number, still follows
from the question alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .engine_rows import Row


@dataclass(frozen=True)
class Node:
    """A run of tokens that the same branches share, decoded once with all their sequence ids."""

    members: tuple[int, ...]  # the branches (one sequence id each) holding these tokens, in plan order
    depth: int  # index, in each member's tokens, of the node's first token
    tokens: tuple[int, ...]
    reads: dict[int, tuple[int, ...]]  # index in tokens -> the token ids any member reads there (first seen first)
    done: tuple[int, ...]  # members whose last decoded token is the node's last: their cells may go after it


def branch_trie(branches: Sequence[Sequence[int]], reads: Sequence[Mapping[int, Sequence[int]]]) -> list[Node]:
    """The branches' tokens as trie nodes in decoding order: depth first, a node's children in the order of their
    first branch, so every branch's tokens are decoded before the next subtree's (and its cells can go)."""
    nodes: list[Node] = []
    pending = [(group, 0) for group in reversed(_by_token([b for b, tokens in enumerate(branches) if tokens],
                                                          branches, 0))]
    while pending:
        members, depth = pending.pop()
        first, end = branches[members[0]], min(len(branches[m]) for m in members)
        stop = depth + 1
        while stop < end and all(branches[m][stop] == first[stop] for m in members):
            stop += 1
        node_reads = {}
        for index in range(depth, stop):
            ids = dict.fromkeys(token for m in members for token in reads[m].get(index, ()))
            if ids:
                node_reads[index - depth] = tuple(ids)
        nodes.append(Node(members, depth, tuple(first[depth:stop]), node_reads,
                          tuple(m for m in members if len(branches[m]) == stop)))
        going_on = [m for m in members if len(branches[m]) > stop]
        pending += [(group, stop) for group in reversed(_by_token(going_on, branches, stop))]
    return nodes


def _by_token(members: Sequence[int], branches: Sequence[Sequence[int]], index: int) -> list[tuple[int, ...]]:
    """Members grouped by their token at `index`, groups in the order of their first member."""
    groups: dict[int, list[int]] = {}
    for member in members:
        groups.setdefault(branches[member][index], []).append(member)
    return [tuple(group) for group in groups.values()]


def member_rows(nodes: Sequence[Node], found: Mapping[int, Mapping[int, Row]],
                reads: Sequence[Mapping[int, Sequence[int]]], branch_start: int) -> tuple[dict[int, Row], ...]:
    """Each branch's own reads by token index, out of its nodes' shared ones (`found`: rows by node, then by
    absolute position; a node's tokens start at `branch_start` + its depth)."""
    rows_by_branch: tuple[dict[int, Row], ...] = tuple({} for _ in reads)
    for tag, node in enumerate(nodes):
        rows = found.get(tag, {})
        for member in node.members:
            for index, among in node.reads.items():
                if (ids := reads[member].get(node.depth + index)) is not None:
                    row = rows[branch_start + node.depth + index]
                    rows_by_branch[member][node.depth + index] = row.select(among, ids)
    return rows_by_branch
