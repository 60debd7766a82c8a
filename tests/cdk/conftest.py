"""Fixtures of the CDK app tests: each shipped environment is synthesized once per session, in process."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from cdk_support import Synth, synth, write_gguf


@pytest.fixture(scope="session")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return Synth(*synth("dev", tmp_path_factory.mktemp("cdk-dev")))


@pytest.fixture(scope="session")
def prod(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return Synth(*synth("prod", tmp_path_factory.mktemp("cdk-prod")))


@pytest.fixture
def make_gguf(tmp_path: Path) -> Callable[[str], Path]:
    return lambda name: write_gguf(tmp_path / name)
