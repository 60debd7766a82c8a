"""The decision image on a decision-typed GGUF: the adapter in front of the image's own llama-server.

One container of the built image on the clef test model (scripts/dev/decision_models.py): /ping, a System One
request on /invocations scored by llama.cpp's decision engine, and the child llama-server as this machine's /proc
shows it (what `ps` and `ss` inside the container would read; the stand-in base has neither): ours, from
/opt/semif, with our libraries mapped, listening on 127.0.0.1 only. On the stand-in, whose /opt/llama.cpp/bin/
llama-server reports b10964 like today's -v1 tags, the Dockerfile's rule builds ours; the DLC's stays untouched.
"""

from __future__ import annotations

import ipaddress
import math
import os
from pathlib import Path

import httpx
from decision_container import Serving
from standin_dlc import LLAMA_DIR, RECIPE

SERVER = "/opt/semif/bin/llama-server"
BINDINGS_LIB = "/opt/semif/lib/python3.11/site-packages/llama_cpp/lib/"
STATE = "I was charged twice for my order last week and nobody has replied."
QUESTIONS = {
    "route": {"type": "choice", "instructions": "Which team should handle this?",
              "criteria": {"billing": "payments and refunds", "shipping": None, "technical": None}},
    "angry": {"type": "noul", "instructions": "Is the customer angry?"},
}
LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp


def children(pid: int) -> list[int]:
    tasks = Path(f"/proc/{pid}/task")
    return [int(child) for task in tasks.iterdir() for child in (task / "children").read_text().split()]


def command_line(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1]


def llama_server_pid(serving: Serving) -> int:
    found = [pid for pid in children(serving.container.host_pid()) if command_line(pid)[0].endswith("llama-server")]
    assert len(found) == 1, [command_line(pid) for pid in children(serving.container.host_pid())]
    return found[0]


def _address(hex_address: str) -> str:
    """`0100007F:1F90` (or its 128-bit form) as `127.0.0.1:8080`: each 32-bit word in host (little-endian) order."""
    host, port = hex_address.split(":")
    packed = b"".join(bytes.fromhex(host[i:i + 8])[::-1] for i in range(0, len(host), 8))
    return f"{ipaddress.ip_address(packed)}:{int(port, 16)}"


def listening_addresses(pid: int) -> set[str]:
    """The local addresses of the process's listening TCP sockets (its fds' socket inodes in its netns's tables)."""
    inodes = {os.readlink(fd)[len("socket:["):-1] for fd in Path(f"/proc/{pid}/fd").iterdir()
              if os.readlink(fd).startswith("socket:[")}
    found = set()
    for table in ("tcp", "tcp6"):
        for row in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = row.split()
            if fields[3] == LISTEN and fields[9] in inodes:
                found.add(_address(fields[1]))
    return found


def test_ping_and_a_system_one_decision_on_invocations(native_serving: Serving) -> None:
    assert native_serving.pings[-1] == 200 and set(native_serving.pings[:-1]) <= {503}, native_serving.pings
    reply = httpx.post(native_serving.container.url + "/invocations", timeout=120,
                       json={"model": "jev-latest", "state": STATE, "questions": QUESTIONS})
    assert reply.status_code == 200, f"{reply.text}\n{native_serving.container.logs()}"
    body = reply.json()
    assert body["x_scoring"] == "native:clef" and list(body["answers"]) == list(QUESTIONS)
    route = body["answers"]["route"]["probabilities"]
    assert set(route) == set(QUESTIONS["route"]["criteria"]) and math.isclose(sum(route.values()), 1, abs_tol=1e-9)
    assert 0 <= body["answers"]["angry"]["noul"] <= 1


def test_the_native_engine_is_the_images_llama_server_on_loopback_only(native_serving: Serving) -> None:
    pid = llama_server_pid(native_serving)
    arguments = command_line(pid)
    assert arguments[0] == SERVER and arguments[arguments.index("--host") + 1] == "127.0.0.1", arguments
    addresses = listening_addresses(pid)
    assert addresses and {address.rsplit(":", 1)[0] for address in addresses} == {"127.0.0.1"}, addresses
    assert os.readlink(f"/proc/{pid}/exe") == SERVER, "ours, not a link to the base's"
    mapped = {line.split()[-1] for line in Path(f"/proc/{pid}/maps").read_text().splitlines() if ".so" in line}
    llama = sorted(path for path in mapped if "/libllama" in path or "/libggml" in path or "/libmtmd" in path)
    assert llama and all(path.startswith(BINDINGS_LIB) for path in llama), llama  # DT_RPATH over LD_LIBRARY_PATH
    assert not [path for path in mapped if path.startswith(LLAMA_DIR)], "a library of the base image is mapped"


def test_the_rule_chose_ours_over_the_dlcs_b10964_and_left_the_dlcs_untouched(native_serving: Serving) -> None:
    root = Path(f"/proc/{native_serving.container.host_pid()}/root")
    assert (root / "opt/semif/llama-server-choice").read_text() == "ours 10964\n"
    assert (root / LLAMA_DIR.lstrip("/") / "llama-server").read_bytes() == (RECIPE / "llama-server").read_bytes()
    versions = native_serving.container.exec("/bin/sh", "-c", f"{SERVER} --version; {LLAMA_DIR}/llama-server --version")
    assert versions.returncode == 0, versions
    assert "(build 11434," in versions.stderr, "ours reports the pinned build"
    assert "version: 10964 (" in versions.stderr, versions.stderr

