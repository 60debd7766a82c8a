"""Hand-picked hostile inputs by category, framing abuse, huge inputs' memory, clients that walk away."""

from __future__ import annotations

import pytest

from bench.reliability.disconnect import run_disconnects
from bench.reliability.hostile import catalog, huge_input_memory, run_catalog, run_raw_cases
from bench.reliability.servers import Server

pytestmark = pytest.mark.slow
CATEGORIES = sorted({case.category for case in catalog()})


@pytest.mark.parametrize("category", CATEGORIES)
def test_every_hostile_case_gets_its_answer(adapter: Server, category: str) -> None:
    cases = [case for case in catalog() if case.category == category]
    result = run_catalog(adapter, cases)
    assert len(result.results) == len(cases) > 0
    assert result.problems == []


def test_lying_lengths_chunked_floods_and_early_goodbyes(adapter: Server) -> None:
    result = run_raw_cases(adapter)
    assert len(result.results) == 4
    assert result.problems == []


def test_refused_huge_inputs_do_not_stay_resident(adapter: Server) -> None:
    result = huge_input_memory(adapter, rounds=6)
    assert result["problems"] == [], result


def test_clients_that_walk_away_leak_no_slot_and_leave_the_kv_cache_right(adapter: Server) -> None:
    result = run_disconnects(adapter, queued=3)
    assert result["problems"] == [], result
    assert result["burst"] == {"200": result["queue_size"]}
    # the probe's state came back from the host-memory cache, then from the KV cache, as the second one did before
    held = result["cached_evaluated_before"][1]
    assert result["cached_evaluated_after"] == [[*held, "host"], [*held, "kv"]]
