"""The System One tools of the ecosystem, run as their users run them: from their own virtualenv, as commands.

`jevcompat`, `sys1bench` and `jevbench` live in `.venv-bench`, fully pinned (requirements-bench.txt), so their
dependency trees (sys1bench brings pandas, scipy, typer) never move the project's pins; `SEMIF_BENCH_TOOLS` names
another venv. Here: finding a tool, the reference server `jevcompat mock` on a free loopback port, and one
conformance run (`jevcompat test --json`).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common.paths import ROOT
from bench.reliability.servers import START_TIMEOUT_S
from scripts.local.processes import LOOPBACK, free_port, start_child, wait_for_ping

TOOLS_ENV = "SEMIF_BENCH_TOOLS"
DEFAULT_TOOLS = ROOT / ".venv-bench"
CONFORMANCE_TIMEOUT_S = 120  # jevcompat's per-request default: a slow answer marks the run incomplete, not failed


class ToolMissingError(RuntimeError):
    """The tools venv is not there: `make bootstrap` makes it (or SEMIF_BENCH_TOOLS points at another)."""


def tools_venv() -> Path:
    return Path(os.environ.get(TOOLS_ENV) or DEFAULT_TOOLS)


def tool(name: str, *, ours_too: bool = False) -> Path:
    """The tool's command in the tools venv, or with `ours_too` also in this venv (requirements-dev.txt pins
    jevcompat, the same version, for the adapter's conformance test); a clear error when it is in neither."""
    candidates = [tools_venv() / "bin" / name, *([Path(sys.executable).parent / name] if ours_too else [])]
    found = next((path for path in candidates if path.exists()), None)
    if found is None:
        raise ToolMissingError(f"{name} is not installed in {tools_venv()} (requirements-bench.txt; `make bootstrap` "
                               f"installs it, or set {TOOLS_ENV} to a venv that has it)")
    return found


def tool_env() -> dict[str, str]:
    """Our environment minus this venv's Python settings, so the tool's own venv decides what it imports."""
    return {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}


@dataclass(frozen=True)
class Running:
    """A System One server under test: what to call it and its root URL (the suite adds /v1/systemone)."""

    name: str
    url: str


@contextlib.contextmanager
def mock_server(name: str = "jevcompat-mock") -> Iterator[Running]:
    """`jevcompat mock`: the spec-exact reference server with a deterministic fake model (no weights, no model
    time), always stopped."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="semif-bench-") as logs:
        argv = [str(tool("jevcompat", ours_too=True)), "mock", "--host", LOOPBACK, "--port", str(port)]
        child = start_child(name, argv, tool_env(), log_path=Path(logs) / "mock.log")
        url = f"http://{LOOPBACK}:{port}"
        try:
            wait_for_ping(child, url + "/v1/models", START_TIMEOUT_S)
            yield Running(name, url)
        finally:
            child.stop()


def conformance(url: str, report: Path, timeout_s: int = CONFORMANCE_TIMEOUT_S) -> dict[str, Any]:
    """`jevcompat test URL --json REPORT` and what its report says: the verdict, MUST and SHOULD counts, the
    requirements that failed or were skipped, the limits it found, and how long the suite took."""
    report.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    argv = [str(tool("jevcompat", ours_too=True)), "test", url, "--json", str(report), "--timeout", str(timeout_s)]
    run = subprocess.run(argv, env=tool_env(), capture_output=True, text=True, check=False)
    wall = round(time.monotonic() - started, 1)
    if not report.exists():
        return {"verdict": None, "exit_status": run.returncode, "wall_s": wall,
                "error": (run.stderr or run.stdout).strip()[-2000:]}
    document = json.loads(report.read_text())
    summary = document.get("summary") or {}
    results = document.get("results") or []
    return {"verdict": summary.get("verdict"), "conformant": summary.get("conformant"),
            "MUST": summary.get("MUST"), "SHOULD": summary.get("SHOULD"),
            "untested_musts": summary.get("untested_musts"),
            "failed": [f"{r['level']} {r['id']}" for r in results if r.get("status") == "fail"],
            "skipped": [f"{r['level']} {r['id']}" for r in results if r.get("status") == "skip"],
            "limits": (document.get("info") or {}).get("limits"),
            "model_reported": (document.get("info") or {}).get("model_reported"),
            "tool_version": document.get("tool_version"), "spec_version": document.get("spec_version"),
            "exit_status": run.returncode, "wall_s": wall, "report": str(report)}

