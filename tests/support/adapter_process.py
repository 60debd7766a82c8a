"""The adapter as the image starts it (`container/serve serve`), on loopback, as a process a test holds."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from scripts.local.endpoints import start_decision_container, wait_settled
from scripts.local.processes import ChildError, wait_for_ping

# A bound on a start that failed, not a speed target: loading and the warm-up took 3 s here idle, 30 s beside six busy
# loops. SageMaker waits at least 600 s (the health-check timeout the CDK app sets: stacks/endpoints/timeouts.py).
START_TIMEOUT = 180.0


class AdapterProcess:
    """One `serve` process started by the project's one adapter launcher; its JSON log lines in a file."""

    def __init__(self, env: dict[str, str], args: tuple[str, ...] = ("serve",)) -> None:
        self.env = env  # what it was started with: another adapter like it is `start_adapter({**env, ...})`
        self._log_dir = tempfile.TemporaryDirectory(prefix="adapter-")
        full_env = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
                    "SM_LLAMA_CPP_CTX_SIZE": "4096", **env}
        self.container = start_decision_container("adapter", full_env, Path(self._log_dir.name), args)
        self.url = self.container.url
        self.proc = self.container.child.process

    def logs(self) -> str:
        log_path = self.container.child.log_path
        return log_path.read_text() if log_path else ""

    def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        try:
            wait_for_ping(self.container.child, self.url + "/ping", timeout)
        except (ChildError, TimeoutError) as error:
            raise AssertionError(f"adapter not ready: {error}\n{self.logs()}") from error

    def wait_settled(self, timeout: float = START_TIMEOUT) -> None:
        """Ready, and done with our engine's partial-reuse probe: an adapter started next loads beside an idle one."""
        try:
            wait_settled(self.container, timeout)
        except (ChildError, TimeoutError) as error:
            raise AssertionError(f"adapter not settled: {error}\n{self.logs()}") from error

    def wait_exit(self, timeout: float = 30.0) -> int:
        return self.proc.wait(timeout=timeout)

    def stop(self) -> None:
        self.container.child.stop(timeout_s=30)
        self._log_dir.cleanup()
