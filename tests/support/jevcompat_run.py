"""The public conformance suite's CLI (`jevcompat test`, unmodified) run against a URL, its JSON report read back."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

KEY = "sk-semif-conformance-test-key"
RUN_TIMEOUT_S = 900


def jevcompat(url: str, report: Path, *extra: str) -> dict:
    jevcompat_cli = Path(sys.executable).parent / "jevcompat"
    done = subprocess.run([str(jevcompat_cli), "test", url, "--json", str(report), "--timeout", "300", *extra],
                          capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False)
    assert report.exists(), done.stdout + done.stderr
    return json.loads(report.read_text())
