"""The decision image's lock files match their inputs, and the Dockerfile installs from them with hashes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from scripts.dev import lock_image_requirements as locks


def test_the_committed_locks_match_their_inputs() -> None:
    assert locks.problems() == [], "run `make lock` and commit the result"


def test_a_pin_bumped_without_a_new_lock_is_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    container = tmp_path / "container"
    shutil.copytree(locks.CONTAINER, container, ignore=shutil.ignore_patterns("semif_adapter", "*.egg-info"))
    requirements = container / "requirements.txt"
    requirements.write_text(requirements.read_text().replace("numpy==", "numpy==0.0.0\n# was numpy=="))
    (container / "requirements-bindings.lock").write_text("# edited by hand\n")
    monkeypatch.setattr(locks, "CONTAINER", container)
    assert locks.problems() == ["requirements.lock: numpy is not locked at 0.0.0 as requirements.txt pins it",
                                "requirements-bindings.lock is not the llama-cpp-python entry of requirements.lock"]


def test_every_pip_install_of_the_image_checks_hashes() -> None:
    text = (locks.CONTAINER / "Dockerfile").read_text().replace("\\\n", " ")
    installs = [line for line in text.splitlines() if "pip install" in line or "pip wheel" in line]
    assert installs
    for line in installs:
        for command in line.split("&&"):
            if "pip install" in command or "pip wheel" in command:
                # the one exception: the wheel the first stage built from the hash-checked sdist
                assert "--require-hashes" in command or "/tmp/wheels/llama_cpp_python-" in command, command
