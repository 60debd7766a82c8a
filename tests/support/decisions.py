"""Posting decisions to a running adapter from tests: one at a time, or all at once from concurrent clients."""

from __future__ import annotations

import asyncio

import httpx


def decide(client: httpx.Client, body: dict) -> dict:
    """One decision; anything but 200 fails the test with the adapter's own error body."""
    response = client.post("/invocations", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def decide_together(url: str, bodies: list[dict]) -> list[dict]:
    """Every body sent at once, one client each (the adapter queues them), answered in the order given."""
    async def together() -> list[dict]:
        async with httpx.AsyncClient(base_url=url, timeout=120) as session:
            responses = await asyncio.gather(*(session.post("/invocations", json=b) for b in bodies))
        assert [r.status_code for r in responses] == [200] * len(bodies), [r.text for r in responses]
        return [r.json() for r in responses]

    return asyncio.run(together())
