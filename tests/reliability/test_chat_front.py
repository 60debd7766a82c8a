"""The chat container (front + real llama-server): load, hostile bodies, a crashing body, a clean stop."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.reliability.chat import chat_crash_probe, chat_hostile, chat_load
from bench.reliability.servers import Server, start_chat

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def chat(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One chat container for the module; stopping it must exit 0 and leave no llama-server behind."""
    server = start_chat(tmp_path_factory.mktemp("reliability-chat"))
    yield server
    stopped = server.stop()
    assert stopped.status == 0 and stopped.survivors == (), (stopped, server.log_text()[-2000:])


def test_chat_load_is_all_answered(chat: Server) -> None:
    result = chat_load(chat, clients=4, duration_s=6)
    assert result["problems"] == [], result
    assert result["by_status"] == {"200": result["sent"]}


def test_hostile_bodies_get_llama_servers_own_answer_and_the_front_keeps_serving(chat: Server) -> None:
    result = chat_hostile(chat)
    assert result["problems"] == [], result
    assert all(case["front"] != 502 for case in result["cases"])


def test_a_body_that_kills_llama_server_ends_in_a_clean_stop(tmp_path: Path) -> None:
    result = chat_crash_probe(tmp_path)
    assert result["problems"] == [], result
    if result["llama_server_crashed"]:  # upstream llama.cpp today: SIGSEGV on 200000 nested arrays
        assert (result["status"], result["code"]) == (502, "upstream_unavailable")
        assert result["container_exit_status"] == 1 and result["survivors"] == []
