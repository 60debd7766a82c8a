"""The engine in process on the real model: prefix cache, exact tokens, and numbers that never depend on either.

In process (not over HTTP) so a test can see every cache state, shrink the cache to force evictions, and make a
decode fail half-way through a request.
"""

from __future__ import annotations

import ctypes
import random
from dataclasses import replace

import pytest
from support.engines import OPENING, QUESTIONS, STATES, Engine, request_of, score_alone, tail

from semif_adapter.core.methods import answer_reads
from semif_adapter.core.service import EXACTNESS_PROBES
from semif_adapter.engine.llama_runtime import LlamaRuntime, TooManyTokensError
from semif_adapter.engine.partial_reuse import PROBE_LENGTH, ReuseRule, common_prefix, probe_splits, verify_on
from semif_adapter.engine.prefix_cache import KEY_OVERHEAD_BYTES, PrefixCache, SavedPrefix, default_budget, token_bytes
from semif_adapter.engine.tokens import check_exact


def uncached(runtime: LlamaRuntime, states: list[str]) -> dict[int, bytes]:
    """Letters logits of each state, each on a new engine and an empty KV cache: nothing reused at all."""
    return {index: score_alone(runtime, "letters", state, QUESTIONS[0])[0] for index, state in enumerate(states)}


def test_random_interleavings_and_evictions_never_change_a_number(runtime):
    reference = {}
    cases = [(m, s, q) for m in ("letters", "likelihood", "pmi") for s in range(len(STATES)) for q in range(2)]
    for method, state, question in cases:
        logits, source, cached = score_alone(runtime, method, STATES[state], QUESTIONS[question])
        # (pmi evaluates its content-free baseline first, so its main prompt finds the head in the KV cache)
        assert (source, cached) == ("none", 0) or (method == "pmi" and source == "kv")
        reference[(method, state, question)] = logits
    one_entry = 60 * 23 * 1024  # about one short state's KV bytes: the cache keeps one or two, evicting the rest
    for cache_bytes in (one_entry, 64 << 20):
        engine = Engine(runtime, cache_bytes)
        rng, sources = random.Random(cache_bytes), set()
        for _ in range(24):
            key = rng.choice(cases)
            logits, source, _ = engine.score(key[0], STATES[key[1]], QUESTIONS[key[2]])
            assert logits == reference[key], key
            sources.add(source)
        assert {"kv", "host"} <= sources
        if cache_bytes == one_entry:
            assert engine.cache.evictions > 0
        engine.close()


def test_a_decode_failing_half_way_leaves_nothing_behind(runtime):
    engine = Engine(runtime, 64 << 20)
    before = engine.score("likelihood", STATES[0], QUESTIONS[0])[0]
    planned = engine.tokenizer.tokens(engine.likelihood.plan(request_of(STATES[1], QUESTIONS[1])))
    branch = planned.branches[0]
    broken = replace(planned, branches=((*branch[:-1], runtime.vocab_size + 7, branch[-1]), *planned.branches[1:]))
    with pytest.raises(RuntimeError, match="llama_decode failed"):  # after the prefix and the common part ran
        engine.engine.evaluate(broken, answer_reads(broken))
    assert engine.score("likelihood", STATES[0], QUESTIONS[0])[0] == before
    assert not engine.cache.holds(planned.key)  # a failed evaluation saves nothing it decoded
    assert engine.score("likelihood", STATES[1], QUESTIONS[1])[0] == Engine(runtime, 0).score(
        "likelihood", STATES[1], QUESTIONS[1])[0]
    engine.close()


def test_prompt_pieces_are_the_whole_prompts_tokens(runtime):
    engine = Engine(runtime, 0)
    probes = [request_of(state, QUESTIONS[0]) for state in EXACTNESS_PROBES]
    plans = [plan for r in probes for plan in (engine.letters.plan(r), engine.likelihood.plan(r))]
    assert check_exact(engine.tokenizer, plans) == []
    # the check can fail: the old cut (the state's opening space in the head) breaks a pre-split token
    old_cut = [replace(p, head=p.head + " ", state=p.state.removeprefix(" ")) for p in plans[:2]]
    assert len(check_exact(engine.tokenizer, old_cut)) == sum(len(plan.branches) for plan in old_cut)
    engine.close()


def test_tokens_split_a_texts_bytes_so_a_text_too_long_for_any_tokens_is_refused_untokenized(runtime):
    """The bound behind refusing a huge text without tokenizing it: BPE gives every byte to exactly one token."""
    longest = runtime.max_piece_bytes
    assert longest == max(len(runtime.piece(token)) for token in range(runtime.vocab_size)) > 64
    rng = random.Random(3)
    texts = [" " * 3000, "-" * 3000, "\n\n\t" * 500, "0123456789" * 300, "é漢🙂ß" * 400, tail(11, 800),
             "".join(chr(rng.randrange(32, 0x3000)) for _ in range(2000)), OPENING * 40]
    for text in texts:
        tokens = runtime.tokenize(text, special=False)
        assert b"".join(runtime.piece(token) for token in tokens) == text.encode(), text[:20]
    limit = 50
    with pytest.raises(TooManyTokensError) as refused:  # one byte more than 50 longest pieces
        runtime.tokenize(" " * (limit * longest + 1), special=False, limit=limit)
    assert not refused.value.exact and refused.value.count == limit + 1
    with pytest.raises(TooManyTokensError) as counted:  # within the bound: tokenized, the exact count
        runtime.tokenize(tail(12, 400)[: limit * longest], special=False, limit=limit)
    assert counted.value.exact and counted.value.count > limit


def test_the_default_budget_leaves_room_for_the_model_and_context():
    gib = 1 << 30
    assert default_budget(gib, gib // 2, limit=8 * gib) == int((8 * gib - gib - gib // 2 - 512 * 2**20) * 0.5)
    assert default_budget(gib, gib, limit=2 * gib) == 0
    assert default_budget(gib, gib, limit=200 * gib) == 16 * gib


def test_the_cache_is_bounded_in_bytes_and_pins_heads():
    def saved(size: int) -> SavedPrefix:
        return SavedPrefix(data=(ctypes.c_uint8 * size)(), tokens=1)

    cache = PrefixCache(20_000)
    cache.put(("head",), saved(5_000), pinned=True)  # pinned entries count against the budget too
    for index in range(20):
        cache.put(("head", f"state {index}"), saved(3_000))
    assert cache.get(("head",)) is not None and cache.evictions > 0
    assert 15_000 <= cache.bytes <= 20_000 and len(cache) == 1 + 4
    assert cache.get(("head", "state 0")) is None and cache.get(("head", "state 19")) is not None
    assert not cache.put(("head", "too big"), saved(30_000))
    assert cache.get(("head",)) is not None  # however full, a head stays


def test_the_reuse_rule_keeps_only_tokens_computed_in_the_class_the_uncached_grid_gives_them():
    rule = ReuseRule(ubatch=512, enabled=True)
    assert rule.keep(held=300, shared=10, total=200) == 10  # tiled then, tiled now, 190 tiled after
    assert rule.keep(held=300, shared=10, total=70) == 6  # the rest must stay 64 tokens long
    assert rule.keep(held=300, shared=10, total=40) == 0  # computed tiled, the uncached 40 would be row-by-row
    assert rule.keep(held=40, shared=10, total=30) == 0  # row-by-row: never relied on
    assert rule.keep(held=560, shared=530, total=600) == 512  # the held 48-token tail ubatch was row-by-row
    assert rule.keep(held=700, shared=600, total=600) == 600  # a state that is the held one's opening
    assert rule.keep(held=300, shared=0, total=200) == 0
    assert ReuseRule(ubatch=512, enabled=False).keep(held=300, shared=10, total=200) == 0
    assert rule.cuts(10, 200) == (10,) and rule.cuts(10, 700) == (10, 512) and rule.cuts(512, 700) == (512,)


def test_the_start_up_probe_fails_where_a_split_crosses_a_kernel_class(runtime):
    engine = Engine(runtime, 0)
    assert engine.enable_partial_reuse() == [] and engine.engine.reuse.enabled
    tokens = [t for s in EXACTNESS_PROBES for t in engine.tokenizer.tokens(engine.letters.plan(request_of(s, "Q?")))
              .joined()]

    def crossing(probe: list[int], splits: tuple[int, ...]) -> object:  # one more cut: a part too short to tile
        return engine.engine.split_decode(probe, sorted({*splits, 20}) if splits else ())

    problems = verify_on(crossing, tokens, runtime.n_ubatch)
    assert len(problems) == 1 and problems[0].startswith(f"{PROBE_LENGTH} tokens split at [67]")
    engine.close()


def test_the_probe_fits_the_ubatch_and_refuses_one_too_small_for_two_tiles():
    assert probe_splits(512) == ((PROBE_LENGTH, (67,)),)
    assert probe_splits(128) == ((128, (64,)),)  # a 262k vocabulary's default ubatch: one ubatch, split at a tile
    assert verify_on(lambda tokens, splits: None, list(range(200)), 100)[0].startswith("a ubatch of 100 tokens")


def test_a_shared_opening_is_kept_where_exact_and_never_moves_a_number(runtime):
    opening = OPENING
    long_shared = opening + tail(9, 560)
    states = [opening + tail(1, 60), opening + tail(2, 80),  # tiled, then tiled: the opening kept
              "Ticket 1042 " + tail(3, 12), "Ticket 1042 " + tail(4, 14),  # short ones (row-by-row): nothing kept
              long_shared + tail(5, 20), long_shared + tail(6, 50),  # past one ubatch: tail ubatches tiled too
              opening + tail(7, 580)]  # after a long one: the opening kept, the rest decoded up to the grid first
    reference = uncached(runtime, states)
    engine = Engine(runtime, 0)
    assert engine.enable_partial_reuse() == []
    head = len(engine.tokenizer.tokens(engine.letters.plan(request_of(states[0], QUESTIONS[0]))).chunks[0][1])
    kept = []
    for index in (0, 1, 2, 3, 4, 5, 6, 1):
        logits, source, cached = engine.score("letters", states[index], QUESTIONS[0])
        assert logits == reference[index], index
        kept.append(cached - head if source == "kv" else None)
    assert kept[1] > 10 and kept[2] == kept[3] == kept[4] == 0 and kept[5] > 512 and 10 < kept[6] < 512, kept
    total = len(engine.tokenizer.tokens(engine.letters.plan(request_of(states[6], QUESTIONS[0]))).chunks[1][1])
    assert total > 512 and engine.engine.reuse.cuts(kept[6], total) == (kept[6], 512)  # two calls, the grid kept
    engine.close()


def test_the_saved_states_nearest_a_new_one_in_token_order_share_its_longest_opening():
    def saved(tokens: list[int]) -> SavedPrefix:
        return SavedPrefix(data=(ctypes.c_uint8 * 100)(), tokens=len(tokens), state=token_bytes(tokens))

    rng = random.Random(5)
    states = {f"s{index}": [rng.randrange(3) for _ in range(rng.randrange(1, 9))] for index in range(300)}
    states["long"] = [1, 2, 0, 70_000, 2, 1, 1]  # a token id past 16 bits: the byte order is the token order
    cache = PrefixCache(10 ** 9)
    for name, tokens in states.items():
        cache.put(("head", name), saved(tokens))
    cache.put(("other head", "x"), saved([1, 2, 0, 70_000, 2, 1, 1, 5]))
    for _ in range(200):
        new = [rng.randrange(3) for _ in range(rng.randrange(1, 9))] + [70_000, 2, 1, 2]
        best = max(common_prefix(tokens, new) for tokens in states.values())
        found = cache.neighbours("head", new)
        assert {key[0] for key, _ in found} == {"head"}
        assert max(common_prefix(tokens, new) for _, tokens in found) == best
        assert all(list(tokens) == states[key[1]] for key, tokens in found)
    small = PrefixCache(3 * (100 + 4 * 3 + len("head") + len("s0") + KEY_OVERHEAD_BYTES))
    for index in range(6):
        small.put(("head", f"s{index}"), saved([index, index, index]))
    assert {key[1] for key, _ in small.neighbours("head", [0, 0, 0])} == {"s3", "s4", "s5"}  # evicted: gone
    assert small.opening(("head", "s3")) is not None and small.openings == 1


def test_a_new_state_keeps_the_longest_opening_of_a_saved_state_and_never_moves_a_number(runtime):
    long_shared = OPENING + tail(9, 560)
    states = [OPENING + tail(1, 60), "Refund asked for order 5531, paid by card. " + tail(2, 70),
              OPENING + tail(3, 80),  # the held state shares nothing with it; a saved one shares the opening
              OPENING + tail(4, 75),  # the held one and a saved one share the opening alike: held, no restore
              long_shared + tail(5, 20), "Customer 77 wrote in Spanish about a parcel. " + tail(6, 90),
              long_shared + tail(7, 50)]  # past one ubatch, from the host cache
    reference = uncached(runtime, states)
    engine = Engine(runtime, 64 << 20)
    assert engine.enable_partial_reuse() == []
    head = len(engine.tokenizer.tokens(engine.letters.plan(request_of(states[0], QUESTIONS[0]))).chunks[0][1])
    seen = []
    for index in range(len(states)):
        logits, source, cached = engine.score("letters", states[index], QUESTIONS[0])
        assert logits == reference[index], index
        seen.append((source, cached - head))
    assert seen[2][0] == "host" and seen[2][1] > 10 and seen[3][0] == "kv" and seen[3][1] >= seen[2][1], seen
    assert seen[6][0] == "host" and seen[6][1] > 512 and engine.cache.openings == 2, seen
    engine.close()
