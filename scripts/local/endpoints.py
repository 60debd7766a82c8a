"""Start the two local containers (chat and decision) and wait until both are ready.

Each container runs as SageMaker runs it: the chat one through our DLC
equivalent (`scripts.local.chat_container`), the decision one as
`container/serve serve` with SageMaker's environment (`SAGEMAKER_BIND_TO_PORT`,
`SM_LLAMA_CPP_*`). Both get the same `SM_LLAMA_CPP_*` settings, as the stack
gives both endpoints the same model settings, with small defaults that suit
a laptop; a setting in the caller's environment wins.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from semif_adapter.deploy.llama_flags import PREFIX
from semif_adapter.settings import cpu_quota

from .processes import LOOPBACK, Child, free_port, start_child, wait_for_ping, wait_until

REPO = Path(__file__).resolve().parents[2]
DECISION_SERVE = REPO / "container" / "serve"
DECISION_ROLE = "decision"
ROLES = ("chat", DECISION_ROLE)
STARTUP_TIMEOUT_S = 180.0  # model load is about a second for the embedded model; big models need more


def local_defaults() -> dict[str, str]:
    """Small, explicit settings for one machine running both containers (the DLC itself has no defaults).

    Each container gets half the CPUs: llama.cpp's worker threads spin while they wait for each other,
    so two servers that each take every core slow each other down badly when both are busy.
    """
    threads = max(1, cpu_quota() // 2)
    return {f"{PREFIX}CTX_SIZE": "2048", f"{PREFIX}PARALLEL": "1", f"{PREFIX}THREADS": str(threads)}


@dataclass(frozen=True)
class Container:
    """One started local container: the endpoint it serves and where."""

    endpoint: str
    child: Child
    url: str


def endpoint_names(prefix: str) -> dict[str, str]:
    """Endpoint names by role, as the stack names them (`{app}-{env}-chat|decision`)."""
    return {role: f"{prefix}-{role}" for role in ROLES}


def names_decision_role(name: str) -> bool:
    """Whether `endpoint_names` (any prefix) gives this name to the decision role: how the gateway finds the
    endpoint (or, shared, the inference component) that answers System One."""
    return name.endswith(f"-{DECISION_ROLE}")


def shared_endpoint_name(prefix: str) -> str:
    """The one endpoint of shared hosting, as the stack names it (`{app}-{env}-models`); its inference components
    keep the role names of `endpoint_names`."""
    return f"{prefix}-models"


def gateway_routes(containers: list[Container], prefix: str, *, shared: bool) -> dict[str, Any]:
    """What the gateway serves: each container as its own endpoint, or (shared) as components of one endpoint."""
    routes = {c.endpoint: c.url for c in containers}
    return {shared_endpoint_name(prefix): routes} if shared else routes


def container_env(base: Mapping[str, str], model: Path) -> dict[str, str]:
    """The environment both containers get: the caller's, local defaults, the model, the venv on PATH."""
    env = dict(base)
    for key, value in local_defaults().items():
        env.setdefault(key, value)
    env[f"{PREFIX}MODEL"] = str(model)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYTHONUNBUFFERED"] = "1"
    return env


def start_chat_container(name: str, env: Mapping[str, str], log_dir: Path, port: int | None = None) -> Container:
    """The chat container (DLC equivalent) on a free loopback port (or `port`: a restart); not waited for."""
    port = port or free_port()
    argv = [sys.executable, "-m", f"{__package__}.chat_container", "--port", str(port)]
    child = start_child(name, argv, env, log_dir / f"{name}.log", cwd=REPO)
    return Container(name, child, f"http://{LOOPBACK}:{port}")


def start_decision_container(name: str, env: Mapping[str, str], log_dir: Path,
                             args: tuple[str, ...] = ("serve",), port: int | None = None) -> Container:
    """`container/serve serve`, as SageMaker runs the image, on a free loopback port (or `port`: a restart); not
    waited for.

    The one launcher of the adapter: local endpoints, benchmarks, reliability runs and tests use it.
    """
    port = port or free_port()
    decision_env = {**env, "SAGEMAKER_BIND_TO_PORT": str(port), "SEMIF_HOST": LOOPBACK}
    # From a checkout the image's own entry point; installed (no container/ beside us), the same server as a module.
    serve = [str(DECISION_SERVE)] if DECISION_SERVE.exists() else [sys.executable, "-m", "semif_adapter"]
    child = start_child(name, [*serve, *args], decision_env, log_dir / f"{name}.log", cwd=REPO)
    return Container(name, child, f"http://{LOOPBACK}:{port}")


def wait_settled(container: Container, timeout_s: float) -> None:
    """A decision container's /ping 200 and, on our engine, its partial-reuse probe done (its first job after that
    200, 0.75 s here idle): whatever starts next then loads beside an idle adapter. Two decodes at once on 2 cores
    take many times longer than in turn (llama.cpp's threads spin at each barrier): two adapters' starts 28 s, one
    2.7 s."""
    deadline = time.monotonic() + timeout_s
    wait_for_ping(container.child, f"{container.url}/ping", timeout_s)

    def log() -> str:
        return container.child.log_path.read_text(errors="replace") if container.child.log_path else ""

    if '"event": "decision engine: ours"' in log():
        wait_until(lambda: '"event": "partial reuse"' in log(), timeout_s=max(deadline - time.monotonic(), 0.1),
                   what=f"{container.endpoint}: the partial-reuse probe", alive=container.child.alive)


def restart(container: Container, env: Mapping[str, str], log_dir: Path) -> Container:
    """The same container again, on its port (what scale to zero brings back; the gateway's routes stay valid)."""
    port = int(container.url.rsplit(":", 1)[1])
    start = start_decision_container if names_decision_role(container.endpoint) else start_chat_container
    return start(container.endpoint, env, log_dir, port=port)


@contextmanager
def local_containers(model: Path, prefix: str, log_dir: Path, *, base_env: Mapping[str, str] | None = None,
                     startup_timeout_s: float = STARTUP_TIMEOUT_S) -> Iterator[list[Container]]:
    """Both containers, ready (`/ping` 200) on entry and stopped (SIGTERM, bounded) on exit."""
    env = container_env(os.environ if base_env is None else base_env, model)
    names = endpoint_names(prefix)
    started: list[Container] = []
    try:
        started.append(start_chat_container(names["chat"], env, log_dir))
        started.append(start_decision_container(names["decision"], env, log_dir))
        deadline = time.monotonic() + startup_timeout_s
        for container in started:  # they load in parallel; the waits share one budget
            wait_for_ping(container.child, f"{container.url}/ping", max(deadline - time.monotonic(), 0.1))
        yield started
    finally:
        for container in reversed(started):
            container.child.stop()
